"""How numbers and names are written in the Markdown and CSV outputs."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from typing import Any

from lm_eval_dcpmi.report import _stats as stats
from lm_eval_dcpmi.report._results import LABELS, METHODS, MISSING, NA, TaskRow, percent
from lm_eval_dcpmi.rules import HEADLINE

DAGGER = "†"  # the best method's lead over the runner-up is significant
# DC-PMI counts documents on which it tied every option (``TaskRow.tied_domain``)
TIED_MARK = "‡"


def md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def limit_text(limit: float) -> str:
    return str(int(limit)) if float(limit).is_integer() else f"{limit:g}"


def value_text(value: float | None) -> str:
    """An accuracy in percent with one decimal; MISSING for None, NA for NaN."""
    if value is None:
        return MISSING
    shown = percent(value)
    return NA if math.isnan(shown) else f"{shown:.1f}"


def score_text(row: TaskRow, method: str) -> str:
    return value_text(row.scores.get(method))


def n_text(row: TaskRow) -> str:
    """Documents scored, ``n / total`` when --limit left some out."""
    if row.n is None:
        return NA
    return f"{row.n} / {row.n_total}" if row.limited else str(row.n)


def p_text(p_value: float | None) -> str:
    if p_value is None or math.isnan(p_value):
        return NA
    return "<0.001" if p_value < 0.001 else f"{p_value:.3f}"


def lead_p_value(row: TaskRow) -> float | None:
    """McNemar p-value of the row's best method over the runner-up (None: no samples, a
    tie, or a group row)."""
    return stats.lead_p_value({m: row.shown(m) for m in METHODS}, row.per_doc)


def marked_cells(row: TaskRow) -> list[str]:
    """The row's accuracy cells, the best in bold (ties too) and, with samples, a dagger
    when its lead over the runner-up is significant."""
    p_value = lead_p_value(row)
    significant = p_value is not None and p_value < stats.SIGNIFICANCE
    best = row.best
    cells = []
    for method in METHODS:
        text = score_text(row, method)
        if method in best:
            text = f"**{text}**" + (DAGGER if significant else "")
        if method == HEADLINE and has_ties(row):
            text += TIED_MARK
        cells.append(text)
    return cells


def has_ties(row: TaskRow) -> bool:
    """Some of the row's documents had domain requests that were their conditional
    requests: DC-PMI scored every option 0 there, and the tie rule picked option 0."""
    return row.tied_domain is not None and row.tied_domain > 0


def header(first: str, *others: str) -> list[str]:
    """A Markdown table header: ``first`` (left-aligned), then right-aligned columns."""
    columns = [first, *others]
    return ["| " + " | ".join(columns) + " |", "|:---|" + "---:|" * len(others)]


def method_labels() -> list[str]:
    return [LABELS[m] for m in METHODS]


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(rows)
    return buffer.getvalue()
