"""The comparisons beyond the paper's five methods: calibration and the priors study.

* ``calibration_markdown``: on tasks with a fixed label set, contextual calibration (CC,
  Zhao et al. 2021) and batch calibration (BC, Zhou et al. 2024) beside LM and DC-PMI,
  each with its 95% interval, and CC and BC against DC-PMI on the same documents.
* ``priors_markdown``: "which prior?": PMI under each reference context a task scored
  (the paper's domain premise, "Answer:", the empty context, the last word, a user's own),
  each with its 95% interval and McNemar's test against the paper's premise.

Both end in the unweighted mean over their tasks. Intervals and tests need the samples
(``--log_samples``); without them the cells hold the accuracy alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lm_eval_dcpmi.report import _stats as stats
from lm_eval_dcpmi.report._formatting import md_cell, n_text, p_text
from lm_eval_dcpmi.report._looks import metric_label
from lm_eval_dcpmi.report._results import DCPMI, MISSING, RunResults, TaskRow
from lm_eval_dcpmi.rules import METRICS, PLAIN, metric_named

# The calibrations (the table's accuracies on a fixed label set), shown beside lm-eval's
# plain score and DC-PMI, and tested against DC-PMI.
CALIBRATIONS = tuple(m.name for m in METRICS if m.scope == "fixed_labels")
CALIBRATION = (PLAIN, DCPMI, *CALIBRATIONS)


def _is_prior(metric: str) -> bool:
    """PMI under an extra reference context (the priors study)."""
    row = metric_named(metric)
    return row is not None and row.reference is not None


def _value(row: TaskRow, metric: str) -> float:
    return row.scores.get(metric, row.extra.get(metric, math.nan))


def _cell(row: TaskRow, metric: str, against: str | None = None) -> str:
    """``61.0 [51.2, 70.0]`` with samples, ``61.0`` without; ``, p=0.020`` against a method."""
    value = _value(row, metric)
    if math.isnan(value):
        return MISSING
    per_doc = row.per_doc or {}
    interval = stats.accuracy_interval(per_doc[metric]) if metric in per_doc else None
    text = f"{100 * value:.1f}"
    if interval is not None:
        text += f" [{100 * interval.low:.1f}, {100 * interval.high:.1f}]"
    if against is not None and against != metric:
        comparison = stats.compare(per_doc, metric, against)
        if comparison is not None:
            p = p_text(comparison.p_value)
            text += f", p{p if p.startswith('<') else '=' + p}"
    return text


def _mean_line(rows: Sequence[TaskRow], metrics: Sequence[str]) -> str:
    means = []
    for metric in metrics:
        values = [_value(row, metric) for row in rows]
        ok = [v for v in values if not math.isnan(v)]
        means.append(f"{100 * sum(ok) / len(ok):.1f}" if len(ok) == len(values) else MISSING)
    return f"| mean ({len(rows)} tasks) | | " + " | ".join(means) + " |"


def calibration_rows(run: RunResults) -> list[TaskRow]:
    return [r for r in run.rows if not r.is_group and any(m in r.extra for m in CALIBRATIONS)]


def calibration_markdown(run: RunResults) -> str:
    """One row per task with CC or BC: LM, DC-PMI, CC, BC (%), CC and BC with McNemar's p
    against DC-PMI; then their mean."""
    rows = calibration_rows(run)
    if not rows:
        return ""
    lines = [
        "### Calibration: CC and BC beside DC-PMI\n",
        "Accuracy (%) with its 95% Wilson interval where samples were logged; for CC and BC, "
        "McNemar's p against DC-PMI on the same documents. CC divides each option's "
        "probability by its mean over the content-free inputs 'N/A', '' and '[MASK]' (Zhao "
        "et al. 2021); BC by its mean over the evaluated documents (Zhou et al. 2024), so "
        "BC depends on which documents were evaluated.\n",
        *calibration_table(rows),
    ]
    return "\n".join(lines) + "\n"


def calibration_table(rows: Sequence[TaskRow]) -> list[str]:
    """The calibration table's lines (header, a row per task, the mean)."""
    lines = [
        "| Task | n | " + " | ".join(metric_label(m) for m in CALIBRATION) + " |",
        "|---|---:|" + "---:|" * len(CALIBRATION),
    ]
    for row in rows:
        cells = [_cell(row, m, DCPMI if m in CALIBRATIONS else None) for m in CALIBRATION]
        lines.append(f"| {md_cell(row.task)} | {n_text(row)} | " + " | ".join(cells) + " |")
    lines.append(_mean_line(rows, CALIBRATION))
    return lines


def prior_metrics(rows: Sequence[TaskRow]) -> list[str]:
    """The paper's DC-PMI, then every other prior the rows scored, in first-seen order."""
    found: dict[str, None] = {}
    for row in rows:
        found.update(dict.fromkeys(m for m in row.extra if _is_prior(m)))
    return [DCPMI, *found]


def prior_rows(run: RunResults) -> list[TaskRow]:
    return [r for r in run.rows if not r.is_group and any(_is_prior(m) for m in r.extra)]


def priors_markdown(run: RunResults) -> str:
    """ "Which prior?": per task, PMI under each reference context, McNemar against the
    paper's domain premise; then the mean over the tasks."""
    rows = prior_rows(run)
    if not rows:
        return ""
    lines = [
        "### Which prior? PMI under each reference context\n",
        "Accuracy (%) of log P(y | premise) - log P(y | reference context), with its 95% "
        "Wilson interval and McNemar's p against the paper's domain premise where samples "
        "were logged.\n",
        *priors_table(rows),
    ]
    if any(LAST_WORD in row.extra for row in rows):
        lines += [
            "",
            "The last word of each premise, the domain premise a `--dcpmi_task` without one "
            "scores, against the paper's premise (points, with the paired 95% interval):\n",
            *premise_gap_table(rows),
        ]
    return "\n".join(lines) + "\n"


def priors_table(rows: Sequence[TaskRow]) -> list[str]:
    """The "which prior?" table's lines (header, a row per task, the mean)."""
    metrics = prior_metrics(rows)
    labels = ["DC-PMI (paper's premise)", *(metric_label(m) for m in metrics[1:])]
    lines = [
        "| Task | n | " + " | ".join(labels) + " |",
        "|---|---:|" + "---:|" * len(metrics),
    ]
    for row in rows:
        cells = [_cell(row, m, DCPMI) for m in metrics]
        lines.append(f"| {md_cell(row.task)} | {n_text(row)} | " + " | ".join(cells) + " |")
    lines.append(_mean_line(rows, metrics))
    return lines


# The prior that a --dcpmi_task without a premise scores as its domain premise (issue 57).
LAST_WORD = "acc_pmi_last_word"


def premise_gap_table(rows: Sequence[TaskRow], prior: str = LAST_WORD) -> list[str]:
    """Per task, DC-PMI under the paper's premise and under ``prior``, the difference
    (``prior`` minus the paper's, points) with its paired 95% interval (Newcombe) and
    McNemar's p; then the means. Rows without ``prior`` are left out."""
    heading = "DC-PMI (last-word premise)" if prior == LAST_WORD else metric_label(prior)
    lines = [
        f"| Task | n | DC-PMI (paper's premise) | {heading} | difference [95% CI] | p |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    kept = [row for row in rows if not math.isnan(_value(row, prior))]
    differences = []
    for row in kept:
        difference = _value(row, prior) - _value(row, DCPMI)
        differences.append(difference)
        comparison = stats.compare(row.per_doc or {}, prior, DCPMI)
        gap = f"{100 * difference:+.1f}"
        p = MISSING
        if comparison is not None:
            interval = comparison.difference
            gap += f" [{100 * interval.low:+.1f}, {100 * interval.high:+.1f}]"
            p = p_text(comparison.p_value)
        lines.append(
            f"| {md_cell(row.task)} | {n_text(row)} | {_cell(row, DCPMI)} | {_cell(row, prior)} "
            f"| {gap} | {p} |"
        )
    if kept:
        mean = sum(differences) / len(differences)
        lines.append(
            f"| mean ({len(kept)} tasks) | | "
            f"{100 * sum(_value(r, DCPMI) for r in kept) / len(kept):.1f} | "
            f"{100 * sum(_value(r, prior) for r in kept) / len(kept):.1f} | {100 * mean:+.1f} | |"
        )
    return lines


def markdown(run: RunResults) -> list[str]:
    """Both sections (each empty when the run has none of its metrics)."""
    return [calibration_markdown(run), priors_markdown(run)]
