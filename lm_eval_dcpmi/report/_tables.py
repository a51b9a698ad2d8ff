"""The Markdown report and the CSV table of one or more runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_dcpmi.report import (
    _comparisons as comparisons,
)
from lm_eval_dcpmi.report import (
    _competition as competition,
)
from lm_eval_dcpmi.report import (
    _intervals as intervals,
)
from lm_eval_dcpmi.report import (
    _studies as studies,
)
from lm_eval_dcpmi.report._formatting import (
    DAGGER,
    TIED_MARK,
    csv_text,
    has_ties,
    header,
    lead_p_value,
    limit_text,
    marked_cells,
    md_cell,
    method_labels,
    n_text,
    p_text,
    score_text,
)
from lm_eval_dcpmi.report._results import LABELS, METHODS, RunResults, TaskRow, run_from_dict
from lm_eval_dcpmi.report._summary import has_summary, summary_markdown
from lm_eval_dcpmi.rules import METRIC_BY_NAME, TIED_DOMAIN, TRUNCATED
from lm_eval_dcpmi.task import derived_label

INTRODUCTION = (
    "# DC-PMI report\n\nAccuracy (%) of the five scoring methods (Holtzman et al., 2021; "
    "Char is lm-eval's acc_norm): Unc = log P(option | domain premise), LM = log P(option "
    "| premise), Avg = LM per option token, Char = LM per option character, DC-PMI = LM - "
    "Unc. Best per task in **bold** (ties too).\n"
)


def table_line(label: str, n: str, cells: Sequence[str]) -> str:
    return f"| {label} | {n} | " + " | ".join(cells) + " |"


def markdown_table(run: RunResults, rows: Sequence[TaskRow] | None = None) -> str:
    """The run's table in Markdown (GitHub flavour): a row per task of ``rows`` (default:
    the main rows, see ``RunResults.main_rows``), the best of each row in bold."""
    lines = header("Task", "n", *method_labels())
    for row in run.main_rows if rows is None else rows:
        label = f"*{md_cell(row.label)}*" if row.is_group else md_cell(row.label)
        lines.append(table_line(label, n_text(row), marked_cells(row)))
    return "\n".join(lines) + "\n"


def _partial_note(run: RunResults) -> str:
    limited = [r for r in run.rows if r.limited and not r.is_group]
    detail = ", ".join(f"{r.task} {r.n} of {r.n_total}" for r in limited[:4])
    if len(limited) > 4:
        detail += f", and {len(limited) - 4} more"
    if run.quick is not None:
        return (
            f"**A sample (--quick {run.quick})**: {run.quick} documents of each task, evenly "
            f"spread over its evaluation split ({detail}): an estimate of the full split's "
            "accuracies, not the full split's."
        )
    # Without a recorded limit the documents were picked another way (--samples, or a
    # --limit lm-eval did not record): name both.
    flag = f"--limit {limit_text(run.limit)}" if run.limit is not None else "--limit or --samples"
    return (
        f"**Partial run ({flag})**: not every document was scored"
        + (f" ({detail})" if detail else "")
        + "; not comparable with full-set accuracies."
    )


def _derived_premise_notes(run: RunResults) -> list[str]:
    """A note per rule that derived some task's domain premise (none was written)."""
    by_rule: dict[str, list[str]] = {}
    for task, rule in run.derived_premises.items():
        by_rule.setdefault(rule, []).append(task)
    return [
        f"{derived_label(rule)} for {', '.join(tasks)}: no domain premise was "
        + (
            "written, so each document's is the last word of its premise (the paper's rule)."
            if rule == "last_word"
            else f"written; the results record it as derived by {rule!r}."
        )
        for rule, tasks in by_rule.items()
    ]


def _tied_note(rows: Sequence[TaskRow]) -> str:
    """What the DC-PMI cells marked ``TIED_MARK`` count: the tasks' ``TIED_DOMAIN``."""
    counts = ", ".join(
        f"{r.task} {int(r.tied_domain or 0)}" + (f" of {r.n}" if r.n is not None else "")
        for r in rows
    )
    return (
        f"{TIED_MARK}: DC-PMI is no measure of the method on some documents ({TIED_DOMAIN}: "
        f"{counts}): their domain requests are their conditional requests (a domain premise "
        "that renders as the premise, or a premise that is its own last word), so every "
        "option scores 0 and the tie rule picks option 0. Write a domain premise that is not "
        "the premise."
    )


def _unfair_prefix_note(run: RunResults) -> str:
    detail = "; ".join(f"{task}: {why}" for task, why in run.unfair_prefix.items())
    return (
        f"No significance marks for {', '.join(run.unfair_prefix)}: --limit took each task's "
        f"first documents, whose gold labels are far from the split's ({detail}). `dcpmi "
        "run --quick N` scores N documents evenly spread over each split."
    )


def _significance_note(run: RunResults, intervals_follow: bool) -> str | None:
    """What the marks of the table above mean: the dagger's note only when a dagger is
    printed; "95% intervals below" only when they follow."""
    if run.has_samples:
        daggers = any(DAGGER in cell for row in run.main_rows for cell in marked_cells(row))
        text = (
            f"{DAGGER}: the best method's lead over the runner-up is significant (McNemar's "
            "exact test on the documents, p < 0.05); a bold value without it is not, or is "
            "a tie."
            if daggers
            else "No best method's lead over the runner-up is significant (McNemar's exact "
            "test on the documents, p < 0.05)."
        )
        return text + (" 95% intervals below." if intervals_follow else "")
    if run.unfair_prefix:  # their samples were set aside, not missing
        return None
    return (
        "Intervals and significance need the per-document samples: `dcpmi report` adds "
        "them for a run made with `--log_samples` (given its --output_path, where the "
        "samples_<task>_<date>.jsonl files lie beside the results file)."
    )


def notes(run: RunResults, *, intervals_follow: bool = False) -> list[str]:
    """The notes under a run's table, only those that apply to it: partial run or sample,
    missing values, truncation, few-shot, prefixes whose labels are no fair look,
    significance (``intervals_follow``: the section goes on with the 95% intervals)."""
    found: list[str] = [_partial_note(run)] if run.limited else []
    needing = [m for m in METHODS if METRIC_BY_NAME[m].needs_tokenizer]
    unknown = [
        LABELS[m] for m in needing if any(math.isnan(r.scores.get(m, 0.0)) for r in run.rows)
    ]
    if unknown:
        found.append(
            f"{', '.join(unknown)} is n/a where no tokenizer was known (give `pretrained=` or "
            "`tokenizer=` in --model_args or --metadata)."
        )
    without = [LABELS[m] for m in METHODS if any(m not in r.scores for r in run.rows)]
    if without:
        found.append(
            f"{', '.join(without)} is – where the results file does not have it (a group "
            "that does not aggregate it, or a file written before the plugin reported it)."
        )
    truncated = [r for r in run.rows if not r.is_group and (r.truncated or 0) > 0]
    if truncated:
        found.append(
            "Requests longer than the model's context (truncated): "
            + ", ".join(f"{r.task} {int(r.truncated)}" for r in truncated)  # type: ignore[arg-type]
            + "."
        )
    found += _derived_premise_notes(run)
    tied = [r for r in run.rows if not r.is_group and has_ties(r)]
    if tied:
        found.append(_tied_note(tied))
    shots = {t: k for t, k in run.n_shot.items() if k not in (0, None, "0")}
    if shots:
        found.append("Few-shot: " + ", ".join(f"{t} {k}-shot" for t, k in shots.items()) + ".")
    if run.unfair_prefix:
        found.append(_unfair_prefix_note(run))
    significance = _significance_note(run, intervals_follow)
    if significance is not None:
        found.append(significance)
    return found


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) + "\n"


def run_section(run: RunResults, *, with_intervals: bool = True) -> str:
    """A run's part of the report: heading, source, main table, notes, studies, intervals."""
    section = [f"## {md_cell(run.model)}\n"]
    if run.source is not None:
        section.append(f"Source: `{run.source}`\n")
    if run.main_rows:
        section.append(markdown_table(run))
    section.append(_bullets(notes(run, intervals_follow=with_intervals and run.has_samples)))
    section += [studies.study_markdown(study) for study in run.studies]
    section += [text for text in comparisons.markdown(run) if text]
    if with_intervals and run.has_samples:
        section.append(intervals.intervals_markdown(run))
        section.append(intervals.differences_markdown(run))
    return "\n".join(section)


def markdown_report(runs: Sequence[RunResults], *, title: bool = True) -> str:
    """A section per run; with several models, the best-method summary after."""
    parts = [INTRODUCTION] if title else []
    parts += [run_section(run) for run in runs]
    surface_forms = competition.competition_markdown(runs)  # per model, its runs pooled
    if surface_forms:
        parts.append(surface_forms)
    if has_summary(runs):
        parts.append("## Best method, share of tasks\n\n" + summary_markdown(runs))
    return "\n".join(parts)


CSV_HEADER = (
    "model",
    "task",
    "is_group",
    "n",
    "n_total",
    *(LABELS[m] for m in METHODS),
    "best",
    "lead_p",
    TRUNCATED,
    "limit",
    "study",
    "statistic",
)


def _csv_row(run: RunResults, row: TaskRow, study: str = "") -> tuple[Any, ...]:
    truncated = row.truncated
    lead = lead_p_value(row)
    return (
        run.model,
        row.task,
        int(row.is_group),
        "" if row.n is None else row.n,
        "" if row.n_total is None else row.n_total,
        *(score_text(row, m) for m in METHODS),
        ";".join(LABELS[m] for m in row.best),
        "" if lead is None else p_text(lead),
        "" if truncated is None or math.isnan(truncated) else int(truncated),
        "" if run.limit is None else limit_text(run.limit),
        study,
        "",
    )


def csv_report(runs: Sequence[RunResults]) -> str:
    """All runs' rows as CSV: accuracy in percent with one decimal (``n/a`` for NaN, ``–``
    when the results file lacks the metric); ``best`` lists the winning methods separated
    by ``;``; ``lead_p`` is McNemar's p for the best method's lead (with samples). The main
    rows come first, then each study's tasks (``study`` names the group) and its ``mean``
    and ``std`` rows (``statistic``)."""
    rows: list[Sequence[Any]] = [CSV_HEADER]
    for run in runs:
        rows += [_csv_row(run, row) for row in run.main_rows]
        for study in run.studies:
            rows += [_csv_row(run, member, study.group) for member in study.members]
            rows += studies.study_csv_rows(run, study, width=len(CSV_HEADER))
    return csv_text(rows)


def format_run(run: RunResults) -> str:
    """The Markdown table, notes and studies of one run; what ``dcpmi run`` prints at the
    end of a run."""
    heading = f"Model: {run.model} (best per task in **bold**)\n\n"
    return heading + "\n".join(
        [
            *([markdown_table(run)] if run.main_rows else []),
            _bullets(notes(run)),
            *(studies.study_markdown(study) for study in run.studies),
            *(text for text in comparisons.markdown(run) if text),
        ]
    )


def format_run_table(results: Mapping[str, Any]) -> str:
    """``format_run`` of an in-memory lm-eval results dict, as returned by
    ``lm_eval.simple_evaluate``. Raises ``ReportError`` when the dict holds no DC-PMI task."""
    return format_run(run_from_dict(results, None))
