"""Across runs: the share of tasks on which each method is best or tied (paper's summary)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi.report.formatting import csv_text, md_cell
from lm_eval_dcpmi.report.results import LABELS, METHODS, NA, RunResults


@dataclass
class Share:
    wins: int  # tasks on which the method is best or tied
    tasks: int

    @property
    def percent(self) -> float:
        return 100.0 * self.wins / self.tasks if self.tasks else math.nan


def summary(runs: Sequence[RunResults]) -> dict[str, dict[str, Share]]:
    """``{method: {model: Share, ..., "overall": Share}}``: on how many tasks each method
    is best or tied. Only the main table's tasks count: group (mean) rows are not tasks,
    and a study's variants of one task would outweigh the others. "overall" pools every
    (model, task) pair."""
    table: dict[str, dict[str, Share]] = {m: {} for m in METHODS}
    for method in METHODS:
        total = Share(0, 0)
        for run in runs:
            tasks = run.tasks
            wins = sum(method in row.best for row in tasks)
            table[method][run.model] = Share(wins, len(tasks))
            total = Share(total.wins + wins, total.tasks + len(tasks))
        table[method]["overall"] = total
    return table


def _share_text(share: Share) -> str:
    return NA if not share.tasks else f"{share.percent:.1f}% ({share.wins}/{share.tasks})"


def summary_markdown(runs: Sequence[RunResults]) -> str:
    """Markdown: a row per method, a column per model and one for all of them; each cell
    is the share of tasks on which the method is best or tied (count in brackets)."""
    table = summary(runs)
    columns = [run.model for run in runs] + ["overall"]
    header = "| Method | " + " | ".join(md_cell(c) for c in columns) + " |"
    lines = [header, "|:---|" + "---:|" * len(columns)]
    for method in METHODS:
        cells = [_share_text(table[method][c]) for c in columns]
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary_csv(runs: Sequence[RunResults]) -> str:
    """CSV of ``summary_markdown``: cells are percentages (one decimal); a last row
    ``tasks`` gives how many tasks each column counts."""
    table = summary(runs)
    columns = [run.model for run in runs] + ["overall"]
    rows: list[Sequence[Any]] = [("method", *columns)]
    for method in METHODS:
        shares = [table[method][c] for c in columns]
        rows.append((LABELS[method], *(NA if not s.tasks else f"{s.percent:.1f}" for s in shares)))
    rows.append(("tasks", *(table[METHODS[0]][c].tasks for c in columns)))
    return csv_text(rows)
