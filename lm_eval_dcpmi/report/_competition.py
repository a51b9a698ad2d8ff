"""Surface form competition, measured: where DC-PMI's gains over LM come from.

The paper's thesis: the most probable option is often wrong because the right answer's
probability is split among its other wordings, mass the options never get. PMA (``pma``,
Wiegreffe et al. 2023) measures what they do get: per document, the sum of the options'
probabilities after the premise. If the thesis holds, DC-PMI gains most where PMA is low.

Per task whose samples log PMA, LM's and DC-PMI's per-document results:

* **quartiles**: the documents in four equal parts by PMA (lowest first; ties by document
  order), each with its number of documents, PMA range, LM and DC-PMI accuracy, DC-PMI's
  gain over LM with Newcombe's paired interval and McNemar's exact p (``_stats``);
* **flips**: the documents DC-PMI fixes (LM wrong, DC-PMI right) and breaks, with McNemar's
  exact p over the task;
* **trend**: Spearman's rank correlation between a document's PMA and its gain (DC-PMI's
  1.0/0.0 minus LM's: -1, 0 or 1), with its two-sided p; negative is the thesis' direction
  (more gain where the options get less mass).

Documents whose PMA is NaN (a loglikelihood that is not finite) are left out, and the
section names them under its table (``left_out_line``; ``dcpmi report`` warns too); a task
with fewer documents than quartiles is left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi.report import _stats as stats
from lm_eval_dcpmi.report._formatting import csv_text, header, md_cell, p_text
from lm_eval_dcpmi.report._intervals import difference_text
from lm_eval_dcpmi.report._results import MISSING, RunResults, TaskRow
from lm_eval_dcpmi.rules import DOMAIN_MASS, HEADLINE, MASS, PLAIN

QUARTILES = 4


@dataclass(frozen=True)
class Quartile:
    """The documents of one PMA quartile."""

    index: int  # 1 = lowest PMA
    low: float  # the quartile's lowest and highest PMA
    high: float
    median: float
    comparison: stats.Comparison  # DC-PMI against LM on these documents


@dataclass(frozen=True)
class Competition:
    """One task's documents by PMA (see the module's docstring)."""

    task: str
    n: int  # documents with a PMA
    mass: float  # their mean PMA
    domain_mass: float | None  # mean PMA after the domain premise (None: not logged)
    quartiles: tuple[Quartile, ...]
    flips: stats.Comparison  # DC-PMI against LM over the task
    trend: float  # Spearman's rho of PMA against the gain (NaN: a constant)
    trend_p: float  # its two-sided p (NaN without scipy)
    left_out: tuple[int, ...] = ()  # doc ids whose PMA is NaN (not in ``n``)


def quartile_groups(values: Sequence[float], parts: int = QUARTILES) -> list[list[int]]:
    """Indices of ``values`` in ``parts`` groups of equal size (sizes differ by at most one)
    by rank, lowest values first; ties are ranked by index, NaN left out.

    >>> quartile_groups([0.4, 0.1, float("nan"), 0.3, 0.2, 0.9, 0.2])
    [[1], [4, 6], [3], [0, 5]]
    """
    order = sorted((i for i, v in enumerate(values) if not math.isnan(v)), key=lambda i: values[i])
    n = len(order)
    return [order[(k * n) // parts : ((k + 1) * n) // parts] for k in range(parts)]


def _spearman(first: Sequence[float], second: Sequence[float]) -> tuple[float, float]:
    if len(set(first)) < 2 or len(set(second)) < 2:
        return (math.nan, math.nan)  # a constant has no rank order
    try:
        from scipy.stats import spearmanr
    except ImportError:  # the `report` extra brings scipy
        return (math.nan, math.nan)
    result = spearmanr(first, second)
    return (float(result.statistic), float(result.pvalue))


def task_competition(row: TaskRow) -> Competition | None:
    """The row's documents by PMA; None without per-document PMA, LM and DC-PMI, or with
    fewer documents than quartiles."""
    per_doc = row.per_doc or {}
    if row.is_group or not all(name in per_doc for name in (MASS, PLAIN, HEADLINE)):
        return None
    mass, plain, headline = per_doc[MASS], per_doc[PLAIN], per_doc[HEADLINE]
    known = [i for i, v in enumerate(mass) if not math.isnan(v)]
    if len(known) < QUARTILES:
        return None
    quartiles = []
    for index, group in enumerate(quartile_groups(mass), start=1):
        masses = [mass[i] for i in group]
        comparison = stats.compare(
            {PLAIN: [plain[i] for i in group], HEADLINE: [headline[i] for i in group]},
            HEADLINE,
            PLAIN,
        )
        if comparison is None:  # no document of the quartile has both results
            return None
        quartiles.append(
            Quartile(index, min(masses), max(masses), statistics.median(masses), comparison)
        )
    flips = stats.compare(
        {name: [per_doc[name][i] for i in known] for name in (PLAIN, HEADLINE)}, HEADLINE, PLAIN
    )
    if flips is None:
        return None
    pairs = [(mass[i], headline[i] - plain[i]) for i in known]
    pairs = [(m, g) for m, g in pairs if not math.isnan(g)]
    trend, trend_p = _spearman([m for m, _ in pairs], [g for _, g in pairs])
    domain = per_doc.get(DOMAIN_MASS)
    domain_known = [domain[i] for i in known if not math.isnan(domain[i])] if domain else []
    return Competition(
        task=row.task,
        n=len(known),
        mass=math.fsum(mass[i] for i in known) / len(known),
        domain_mass=math.fsum(domain_known) / len(domain_known) if domain_known else None,
        quartiles=tuple(quartiles),
        flips=flips,
        trend=trend,
        trend_p=trend_p,
        left_out=row.unmeasured,
    )


def competitions(run: RunResults) -> list[Competition]:
    """``task_competition`` of every task of ``run`` that has one, in report order."""
    found = [task_competition(row) for row in run.rows]
    return [c for c in found if c is not None]


def competition_groups(runs: Sequence[RunResults]) -> list[tuple[str, list[Competition]]]:
    """``(label, competitions)`` per model: the runs of one model over different tasks (a
    suite scored one task per run, like ``results/full``) pooled under its name, in paper
    order; runs of one model that share a task each under their own (dated) name."""
    by_model: dict[str, list[RunResults]] = {}
    for run in runs:
        by_model.setdefault(run.model_name or run.model, []).append(run)
    order = {task: i for i, task in enumerate(paper.paper_order())}
    groups = []
    for name, group in by_model.items():
        tasks = [row.task for run in group for row in run.tasks]
        if len(group) > 1 and len(tasks) == len(set(tasks)):
            pooled = [c for run in group for c in competitions(run)]
            pooled.sort(key=lambda c: order.get(c.task, len(order)))
            groups.append((name, pooled))
        else:
            groups += [(run.model, competitions(run)) for run in group]
    return [(label, found) for label, found in groups if found]


def _mass_text(value: float | None) -> str:
    if value is None or math.isnan(value):
        return MISSING
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def _gain_text(comparison: stats.Comparison) -> str:
    """``+3.0, p=0.520``: ``_intervals.difference_text`` without the interval."""
    p = p_text(comparison.p_value)
    return f"{100 * comparison.difference.value:+.1f}, p{p if p.startswith('<') else '=' + p}"


def _trend_text(c: Competition) -> str:
    if math.isnan(c.trend):
        return MISSING
    p = p_text(c.trend_p)
    return f"{c.trend:+.3f}, p{p if p.startswith('<') else '=' + p}"


def _accuracy(values: int, n: int) -> str:
    return f"{100 * values / n:.1f}" if n else MISSING


def thesis_line(found: Sequence[Competition]) -> str:
    """How many tasks agree with the thesis: more gain in the lowest quartile than in the
    highest, and a negative trend (significant: p < 0.05)."""
    lower = sum(
        c.quartiles[0].comparison.difference.value > c.quartiles[-1].comparison.difference.value
        for c in found
    )
    negative = sum(c.trend < 0 for c in found)
    significant = sum(c.trend < 0 and c.trend_p < stats.SIGNIFICANCE for c in found)
    against = sum(c.trend > 0 and c.trend_p < stats.SIGNIFICANCE for c in found)
    return (
        f"DC-PMI gains more in the lowest PMA quartile than in the highest on {lower} of "
        f"{len(found)} tasks; the trend is negative on {negative} ({significant} with p < "
        f"{stats.SIGNIFICANCE:g}) and significantly positive, against the thesis, on {against}."
    )


def competition_markdown(runs: Sequence[RunResults]) -> str:
    """The report's section: per model (``competition_groups``) a row per task (PMA, flips,
    gain per quartile, trend), then a row per task and quartile; empty when no task's
    samples log PMA."""
    return "\n".join(group_markdown(label, found) for label, found in competition_groups(runs))


EXPLANATION = (
    "PMA: the probability mass on the options after the premise (mean over documents; after "
    "the domain premise alone beside it). Fixes and breaks: documents DC-PMI gets right and "
    "LM wrong, and the reverse (McNemar's exact p). Q1-Q4: the documents by PMA in four equal "
    "parts, lowest first; gain: DC-PMI minus LM in points on those documents, McNemar's p. "
    "Trend: Spearman's rank correlation of a document's PMA with its gain; negative is the "
    "paper's thesis (more gain where the options get less mass)."
)


def task_table(found: Sequence[Competition]) -> list[str]:
    """A row per task: PMA (and after the domain premise), fixes, breaks and McNemar's p,
    the gain in each quartile, the trend."""
    gains = [f"Q{k} gain" for k in range(1, QUARTILES + 1)]
    lines = header("Task", "n", "PMA", "PMA domain", "fixes", "breaks", "p", *gains, "trend")
    for c in found:
        counts = c.flips.counts
        cells = [
            str(c.n),
            _mass_text(c.mass),
            _mass_text(c.domain_mass),
            str(counts.first_only),
            str(counts.second_only),
            p_text(c.flips.p_value),
            *(_gain_text(q.comparison) for q in c.quartiles),
            _trend_text(c),
        ]
        lines.append(f"| {md_cell(c.task)} | " + " | ".join(cells) + " |")
    return lines


def quartile_table(found: Sequence[Competition]) -> list[str]:
    """A row per task and quartile: documents, PMA range and median, LM's and DC-PMI's
    accuracy, the gain with its interval and McNemar's p."""
    lines = header("Task", "quartile", "n", "PMA range", "median", "LM", "DC-PMI", "gain")
    for c in found:
        for q in c.quartiles:
            counts = q.comparison.counts
            n = counts.n
            cells = [
                f"Q{q.index}",
                str(n),
                f"{_mass_text(q.low)}-{_mass_text(q.high)}",
                _mass_text(q.median),
                _accuracy(counts.both + counts.second_only, n),
                _accuracy(counts.both + counts.first_only, n),
                difference_text(q.comparison),
            ]
            lines.append(f"| {md_cell(c.task)} | " + " | ".join(cells) + " |")
    return lines


def left_out_line(c: Competition) -> str:
    """The documents of ``c``'s task the section leaves out (PMA NaN); empty: none."""
    if not c.left_out:
        return ""
    shown = ", ".join(map(str, c.left_out[:5])) + (", ..." if len(c.left_out) > 5 else "")
    return (
        f"{c.task}: {len(c.left_out)} of {c.n + len(c.left_out)} documents left out, their PMA "
        f"NaN (a loglikelihood that is not finite): doc {shown}.\n"
    )


def group_markdown(label: str, found: Sequence[Competition]) -> str:
    """One model's part of the section (see ``competition_markdown``)."""
    lines = [
        f"## Surface form competition: {md_cell(label)}\n",
        f"DC-PMI's gain over LM by the probability mass the model puts on the options. "
        f"{EXPLANATION}\n",
        *task_table(found),
        "",
        *(line for c in found if (line := left_out_line(c))),
        thesis_line(found),
        "",
        "By quartile: documents, PMA range and median, LM and DC-PMI accuracy (%), and "
        "DC-PMI's gain in points with its 95% interval (Newcombe) and McNemar's p.\n",
        *quartile_table(found),
    ]
    return "\n".join(lines) + "\n"


COMPETITION_HEADER = (
    "model",
    "task",
    "quartile",
    "n",
    "pma_low",
    "pma_high",
    "pma_median",
    "lm",
    "dcpmi",
    "gain",
    "gain_low",
    "gain_high",
    "mcnemar_p",
    "fixes",
    "breaks",
)


def competition_csv(groups: Sequence[tuple[str, Sequence[Competition]]]) -> str:
    """A row per (model, task, quartile), then the task's whole (quartile ``all``, with the
    trend's rho and p; the PMA range left blank): accuracies and gains in percent, PMA as a
    probability; ``groups``: ``competition_groups`` of the report's runs."""
    rows: list[Sequence[Any]] = [(*COMPETITION_HEADER, "trend_rho", "trend_p")]
    for label, found in groups:
        for c in found:
            parts = [(f"Q{q.index}", q.comparison, q.low, q.high, q.median) for q in c.quartiles]
            parts.append(("all", c.flips, math.nan, math.nan, math.nan))
            for name, comparison, low, high, median in parts:
                counts, d = comparison.counts, comparison.difference
                whole = name == "all"
                rows.append(
                    (
                        label,
                        c.task,
                        name,
                        counts.n,
                        *("" if math.isnan(x) else f"{x:.6g}" for x in (low, high, median)),
                        f"{100 * (counts.both + counts.second_only) / counts.n:.4g}",
                        f"{100 * (counts.both + counts.first_only) / counts.n:.4g}",
                        f"{100 * d.value:.4g}",
                        f"{100 * d.low:.4g}",
                        f"{100 * d.high:.4g}",
                        f"{comparison.p_value:.4g}",
                        counts.first_only,
                        counts.second_only,
                        f"{c.trend:.4g}" if whole and not math.isnan(c.trend) else "",
                        f"{c.trend_p:.4g}" if whole and not math.isnan(c.trend_p) else "",
                    )
                )
    return csv_text(rows)
