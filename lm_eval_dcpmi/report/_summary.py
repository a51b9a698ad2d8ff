"""Across runs: the share of tasks on which each method is best or tied (paper's summary)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi.report._formatting import csv_text, md_cell
from lm_eval_dcpmi.report._results import LABELS, METHODS, NA, RunResults, TaskRow


@dataclass
class Share:
    wins: int  # tasks on which the method is best or tied
    tasks: int

    @property
    def percent(self) -> float:
        return 100.0 * self.wins / self.tasks if self.tasks else math.nan


@dataclass
class Column:
    """One column of the summary: a model, with the main-table tasks of its runs."""

    label: str
    tasks: list[TaskRow]


def columns(runs: Sequence[RunResults]) -> list[Column]:
    """The summary's columns: one per model, pooling the main-table tasks of its runs (a
    model's tasks split over several files, or a main run beside study runs); a run with
    no main-table task (only study groups) adds nothing. Runs of one model that share a
    task (a rerun, a ``--limit`` run beside a full one) stay separate columns under their
    run names: pooled, that task would count twice."""
    by_model: dict[str, list[RunResults]] = {}
    for run in runs:
        if run.tasks:
            by_model.setdefault(run.model_name or run.model, []).append(run)
    found: list[Column] = []
    for model, model_runs in by_model.items():
        names = [row.task for run in model_runs for row in run.tasks]
        if len(names) == len(set(names)):
            found.append(Column(model, [row for run in model_runs for row in run.tasks]))
        else:
            found += [Column(run.model, run.tasks) for run in model_runs]
    return found


def has_summary(runs: Sequence[RunResults]) -> bool:
    """A summary compares models: it is written when there are at least two columns."""
    return len(columns(runs)) > 1


def summary(runs: Sequence[RunResults]) -> dict[str, dict[str, Share]]:
    """``{method: {column: Share, ..., "overall": Share}}``: on how many tasks each method
    is best or tied, per column of ``columns`` (a model). Only the main table's tasks
    count: group (mean) rows are not tasks, and a study's variants of one task would
    outweigh the others. "overall" pools every (model, task) pair."""
    table: dict[str, dict[str, Share]] = {m: {} for m in METHODS}
    for method in METHODS:
        total = Share(0, 0)
        for column in columns(runs):
            wins = sum(method in row.best for row in column.tasks)
            table[method][column.label] = Share(wins, len(column.tasks))
            total = Share(total.wins + wins, total.tasks + len(column.tasks))
        table[method]["overall"] = total
    return table


def _share_text(share: Share) -> str:
    return NA if not share.tasks else f"{share.percent:.1f}% ({share.wins}/{share.tasks})"


def summary_markdown(runs: Sequence[RunResults]) -> str:
    """Markdown: a row per method, a column per model (``columns``) and one for all; each cell
    is the share of tasks on which the method is best or tied (count in brackets)."""
    table = summary(runs)
    labels = [column.label for column in columns(runs)] + ["overall"]
    header = "| Method | " + " | ".join(md_cell(c) for c in labels) + " |"
    lines = [header, "|:---|" + "---:|" * len(labels)]
    for method in METHODS:
        cells = [_share_text(table[method][c]) for c in labels]
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary_csv(runs: Sequence[RunResults]) -> str:
    """CSV of ``summary_markdown``: cells are percentages (one decimal); a last row
    ``tasks`` gives how many tasks each column counts."""
    table = summary(runs)
    labels = [column.label for column in columns(runs)] + ["overall"]
    rows: list[Sequence[Any]] = [("method", *labels)]
    for method in METHODS:
        shares = [table[method][c] for c in labels]
        rows.append((LABELS[method], *(NA if not s.tasks else f"{s.percent:.1f}" for s in shares)))
    rows.append(("tasks", *(table[METHODS[0]][c].tasks for c in labels)))
    return csv_text(rows)
