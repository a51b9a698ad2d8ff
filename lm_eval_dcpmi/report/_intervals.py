"""95% intervals and DC-PMI's paired comparisons, per task with logged samples.

See ``_stats`` for the methods: Wilson intervals for accuracies, Newcombe's paired interval
for DC-PMI minus another method, McNemar's exact test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lm_eval_dcpmi.report import _stats as stats
from lm_eval_dcpmi.report._formatting import csv_text, header, md_cell, method_labels, p_text
from lm_eval_dcpmi.report._results import DCPMI, LABELS, METHODS, MISSING, NA, RunResults, TaskRow

OTHERS = tuple(m for m in METHODS if m != DCPMI)


def _points(value: float) -> str:
    return f"{100 * value:.1f}"


def interval_text(interval: stats.Interval | None) -> str:
    """``61.0 [51.2, 70.0]`` (percent)."""
    if interval is None:
        return MISSING
    return f"{_points(interval.value)} [{_points(interval.low)}, {_points(interval.high)}]"


def difference_text(comparison: stats.Comparison | None) -> str:
    """``+3.0 [-5.1, 11.0], p=0.520`` (points; McNemar's p)."""
    if comparison is None:
        return MISSING
    d = comparison.difference
    p = p_text(comparison.p_value)
    p = p if p.startswith("<") else f"={p}"
    return f"{100 * d.value:+.1f} [{_points(d.low)}, {_points(d.high)}], p{p}"


def _rows_with_samples(run: RunResults) -> list[TaskRow]:
    return [row for row in run.rows if row.per_doc and not row.is_group]


def task_intervals(row: TaskRow) -> dict[str, stats.Interval | None]:
    per_doc = row.per_doc or {}
    return {m: stats.accuracy_interval(per_doc[m]) if m in per_doc else None for m in METHODS}


def task_comparisons(row: TaskRow) -> dict[str, stats.Comparison | None]:
    """DC-PMI against each other method on the row's documents."""
    return {m: stats.compare(row.per_doc or {}, DCPMI, m) for m in OTHERS}


def intervals_markdown(run: RunResults) -> str:
    """A row per task with samples: each accuracy (%) with its 95% Wilson interval."""
    lines = [
        "### 95% intervals\n",
        "Accuracy (%) with its 95% Wilson score interval, from the logged per-document results.\n",
        *header("Task", "n", *method_labels()),
    ]
    for row in _rows_with_samples(run):
        found = task_intervals(row)
        n = max((i.n for i in found.values() if i is not None), default=0)
        cells = [interval_text(found[m]) for m in METHODS]
        lines.append(f"| {md_cell(row.task)} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def differences_markdown(run: RunResults) -> str:
    """A row per task with samples: DC-PMI minus each other method, paired."""
    lines = [
        "### DC-PMI against each method\n",
        "DC-PMI's accuracy minus the method's, in points, on the same documents: 95% "
        "interval (Newcombe's hybrid score interval for paired proportions) and two-sided "
        "p of McNemar's exact test (no correction for the 4 comparisons per task).\n",
        *header("Task", *(f"{LABELS[DCPMI]} - {LABELS[m]}" for m in OTHERS)),
    ]
    for row in _rows_with_samples(run):
        found = task_comparisons(row)
        cells = [difference_text(found[m]) for m in OTHERS]
        lines.append(f"| {md_cell(row.task)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


INTERVALS_HEADER = (
    "model",
    "task",
    "method",
    "n",
    "accuracy",
    "low",
    "high",
    "dcpmi_minus",
    "difference_low",
    "difference_high",
    "mcnemar_p",
    "dcpmi_only",
    "method_only",
)


def _p_number(p_value: float) -> str:
    return NA if math.isnan(p_value) else f"{p_value:.4g}"


def _blank_if_none(value: float | None, text: Any = _points) -> str:
    return "" if value is None else text(value)


def intervals_csv(runs: Sequence[RunResults]) -> str:
    """A row per (run, task with samples, method): accuracy and 95% interval in percent;
    for the methods other than DC-PMI, DC-PMI minus the method in points with its paired
    interval, McNemar's p, and the discordant counts (documents only DC-PMI / only the
    method gets right)."""
    rows: list[Sequence[Any]] = [INTERVALS_HEADER]
    for run in runs:
        for row in _rows_with_samples(run):
            found, compared = task_intervals(row), task_comparisons(row)
            for method in METHODS:
                interval, comparison = found[method], compared.get(method)
                difference = None if comparison is None else comparison.difference
                rows.append(
                    (
                        run.model,
                        row.task,
                        LABELS[method],
                        "" if interval is None else interval.n,
                        _blank_if_none(None if interval is None else interval.value),
                        _blank_if_none(None if interval is None else interval.low),
                        _blank_if_none(None if interval is None else interval.high),
                        _blank_if_none(None if difference is None else difference.value),
                        _blank_if_none(None if difference is None else difference.low),
                        _blank_if_none(None if difference is None else difference.high),
                        _blank_if_none(
                            None if comparison is None else comparison.p_value, _p_number
                        ),
                        "" if comparison is None else comparison.counts.first_only,
                        "" if comparison is None else comparison.counts.second_only,
                    )
                )
    return csv_text(rows)
