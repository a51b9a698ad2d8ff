"""Study groups (``_paper.STUDIES``): one task under several templates or example sets.

The paper reports such a study as each method's mean and standard deviation over the
variants (tables 3 and 4). Here: the **sample** standard deviation (n - 1) over the
group's tasks of each method's accuracy, both in points; the best mean in bold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi.report import _stats as stats
from lm_eval_dcpmi.report._formatting import (
    header,
    marked_cells,
    md_cell,
    method_labels,
    n_text,
    value_text,
)
from lm_eval_dcpmi.report._results import LABELS, METHODS, RunResults, Study, best_of, percent


@dataclass(frozen=True)
class Spread:
    """One method over a study's tasks (fractions; NaN when a task lacks the value)."""

    mean: float
    std: float  # sample standard deviation (n - 1); NaN with one task
    values: tuple[float, ...]  # per task, in the study's order


def spreads(study: Study) -> dict[str, Spread]:
    """Each method's mean and sample std over the study's tasks; methods that some task
    does not report at all are left out."""
    found = {}
    for method in METHODS:
        if any(method not in member.scores for member in study.members):
            continue
        values = tuple(member.scores[method] for member in study.members)
        mean, std = stats.mean_std(values)
        found[method] = Spread(mean, std, values)
    return found


def best_mean(spread: dict[str, Spread]) -> tuple[str, ...]:
    return best_of({m: percent(s.mean) for m, s in spread.items()})


def study_markdown(study: Study) -> str:
    """A study's heading, a row per task, then the mean and sample std rows."""
    spread = spreads(study)
    count = len(study.members)
    lines = [
        f"### Study: {md_cell(study.group)}\n",
        f"{md_cell(study.description)}. Accuracy (%) per task, then each method's mean and "
        f"sample standard deviation (n - 1) over the {count} task(s); best mean in **bold**.\n",
        *header("Task", "n", *method_labels()),
    ]
    for member in study.members:
        cells = " | ".join(marked_cells(member))
        lines.append(f"| {md_cell(member.task)} | {n_text(member)} | {cells} |")
    best = best_mean(spread)
    means, stds = [], []
    for method in METHODS:
        one = spread.get(method)
        mean = value_text(None if one is None else one.mean)
        means.append(f"**{mean}**" if method in best else mean)
        stds.append(value_text(None if one is None else one.std))
    lines.append("| *mean* | | " + " | ".join(means) + " |")
    lines.append("| *std* | | " + " | ".join(stds) + " |")
    return "\n".join(lines) + "\n"


def study_csv_rows(run: RunResults, study: Study, width: int) -> list[Sequence[Any]]:
    """The study's ``mean`` and ``std`` rows, laid out like ``_tables.CSV_HEADER``."""
    spread = spreads(study)
    best = ";".join(LABELS[m] for m in best_mean(spread))
    rows = []
    for statistic in ("mean", "std"):
        values = [
            value_text(None if m not in spread else getattr(spread[m], statistic)) for m in METHODS
        ]
        # n and n_total stay empty: the statistic is over tasks, not documents.
        row = [run.model, study.group, 1, "", "", *values, best if statistic == "mean" else ""]
        row += [""] * (width - len(row) - 2) + [study.group, statistic]
        rows.append(row)
    return rows
