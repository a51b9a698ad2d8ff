"""Figures (PNG, matplotlib's Agg canvas: no display needed, pyplot's state untouched).

* ``plot_run``: per run, grouped bars per task (one colour per method, 95% Wilson
  intervals when samples were logged) and below them DC-PMI minus the best other method;
* ``plot_study``: per study, each method's accuracies over the study's tasks as a box
  with every task's point on it and the mean marked, so the spread shows, not only the mean;
* ``plot_competition``: per model whose samples log PMA (its runs pooled), DC-PMI's gain
  over LM against PMA: a small multiple, a panel per task with its four PMA quartiles
  (``_competition``), lowest first. Bars falling from left to right are the paper's thesis
  (more gain where the options get less probability mass).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.report._competition import Competition
from lm_eval_dcpmi.report._formatting import limit_text
from lm_eval_dcpmi.report._intervals import task_intervals
from lm_eval_dcpmi.report._looks import metric_look
from lm_eval_dcpmi.report._results import (
    DCPMI,
    LABELS,
    METHODS,
    MISSING,
    NA,
    ReportError,
    RunResults,
    Study,
    TaskRow,
)
from lm_eval_dcpmi.report._studies import spreads

# One colour per method, the same in every figure (report/_looks.py).
COLOURS = {method: metric_look(method).colour for method in METHODS}
GAIN_COLOUR, LOSS_COLOUR, EVEN_COLOUR = "#2ca02c", "#d62728", "#8c8c8c"
FIGSIZE = (12.0, 8.0)  # inches
STUDY_FIGSIZE = (10.0, 6.0)
COMPETITION_PANEL = (3.0, 2.6)  # inches a task, four across (the title needs 6 inches)
DPI = 100  # -> 1200 x 800 pixels


def _figure(figsize: tuple[float, float], dpi: int) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the install
        raise ReportError("figures need matplotlib: pip install 'lm-eval-dcpmi[report]'") from None
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | PathLike, dpi: int) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    return path


def _short_task(row: TaskRow) -> str:
    name = row.task[len("dcpmi_") :] if row.task.startswith("dcpmi_") else row.task
    return f"{name} (mean)" if row.is_group else name


def dcpmi_gain(row: TaskRow) -> float:
    """DC-PMI minus the best other method, in points (as displayed); NaN if undefined."""
    others = [row.shown(m) for m in METHODS if m != DCPMI]
    others = [v for v in others if not math.isnan(v)]
    own = row.shown(DCPMI)
    if not others or math.isnan(own):
        return math.nan
    return round(own - max(others), 1)


def _error_bars(rows: Sequence[TaskRow], method: str) -> list[list[float]] | None:
    """Lower and upper distances (points) of each row's Wilson interval; None when no row
    has samples."""
    if not any(row.per_doc for row in rows):
        return None
    below, above = [], []
    for row in rows:
        interval = task_intervals(row)[method] if row.per_doc else None
        value = row.shown(method)
        if interval is None or math.isnan(value):
            below.append(0.0)
            above.append(0.0)
        else:
            below.append(max(0.0, value - 100 * interval.low))
            above.append(max(0.0, 100 * interval.high - value))
    return [below, above]


def _accuracy_bars(axes: Any, rows: Sequence[TaskRow], x: list[int]) -> None:
    width = 0.8 / len(METHODS)
    for i, method in enumerate(METHODS):
        offsets = [pos + (i - (len(METHODS) - 1) / 2) * width for pos in x]
        values = [row.shown(method) for row in rows]
        heights = [0.0 if math.isnan(v) else v for v in values]
        axes.bar(
            offsets,
            heights,
            width,
            label=LABELS[method],
            color=COLOURS[method],
            yerr=_error_bars(rows, method),
            error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "black"},
        )
        for pos, value, row in zip(offsets, values, rows, strict=True):
            if math.isnan(value):
                text = NA if method in row.scores else MISSING
                axes.text(pos, 1, text, rotation=90, ha="center", va="bottom", fontsize=7)


def _gain_bars(axes: Any, rows: Sequence[TaskRow], x: list[int]) -> None:
    gains = [dcpmi_gain(row) for row in rows]
    colours = [
        EVEN_COLOUR if math.isnan(g) or g == 0 else GAIN_COLOUR if g > 0 else LOSS_COLOUR
        for g in gains
    ]
    axes.bar(x, [0.0 if math.isnan(g) else g for g in gains], 0.6, color=colours)
    axes.axhline(0, color="black", linewidth=0.8)
    finite = [abs(g) for g in gains if not math.isnan(g)]
    span = max([*finite, 1.0]) * 1.3
    axes.set_ylim(-span, span)
    for pos, gain in zip(x, gains, strict=True):
        text = NA if math.isnan(gain) else f"{gain:+.1f}"
        y = 0 if math.isnan(gain) else gain
        axes.text(pos, y, text, ha="center", va="bottom" if y >= 0 else "top", fontsize=9)


def plot_run(
    run: RunResults,
    path: str | PathLike,
    *,
    figsize: tuple[float, float] = FIGSIZE,
    dpi: int = DPI,
) -> Path:
    """Write the run's figure (its main rows) as PNG, ``figsize * dpi`` pixels (1200x800).

    Top: grouped bars per task (Unc, LM, Avg, Char, DC-PMI; fixed colours; ``n/a`` where a
    value is missing; 95% Wilson intervals with samples). Bottom: DC-PMI minus the best
    other method, in points (green above zero, red below).
    """
    rows = run.main_rows
    x = list(range(len(rows)))
    fig = _figure(figsize, dpi)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    _accuracy_bars(top, rows, x)
    top.set_ylim(0, 112)  # room for the legend above 100 %
    top.set_yticks(range(0, 101, 20))
    top.set_ylabel("Accuracy (%)", fontsize=11)
    top.grid(axis="y", alpha=0.3)
    top.set_axisbelow(True)
    top.legend(ncols=len(METHODS), loc="upper right", fontsize=10, frameon=False)
    title = f"DC-PMI report: {run.model}"
    if run.limited:
        title += f" (partial run, --limit {limit_text(run.limit)})" if run.limit else " (partial)"
    if run.has_samples:
        title += "; bars: 95% Wilson intervals"
    top.set_title(title, fontsize=13)

    _gain_bars(bottom, rows, x)
    bottom.set_ylabel(f"{LABELS[DCPMI]} - best other\n(points)", fontsize=11)
    bottom.grid(axis="y", alpha=0.3)
    bottom.set_axisbelow(True)
    bottom.set_xticks(x)
    bottom.set_xticklabels([_short_task(row) for row in rows], rotation=30, ha="right", fontsize=10)
    slots = max(len(rows), 4)  # a lone task keeps bars of a normal width, centred
    centre = (len(rows) - 1) / 2
    bottom.set_xlim(centre - slots / 2 - 0.1, centre + slots / 2 + 0.1)
    n_tasks = sum(not row.is_group for row in rows)
    if 0 < n_tasks < len(rows):  # a dashed line between the tasks and the group rows
        for axes in (top, bottom):
            axes.axvline(n_tasks - 0.5, color="black", linestyle="--", linewidth=0.8)
    return _save(fig, path, dpi)


def plot_study(
    run: RunResults,
    study: Study,
    path: str | PathLike,
    *,
    figsize: tuple[float, float] = STUDY_FIGSIZE,
    dpi: int = DPI,
) -> Path:
    """Write a study's figure as PNG (1000x600): per method, a box over the study's task
    accuracies, every task as a point (spread sideways in a fixed pattern), the mean as a
    black diamond and written as ``mean ± std`` below the axis."""
    spread = spreads(study)
    methods = [m for m in METHODS if m in spread]
    fig = _figure(figsize, dpi)
    axes = fig.subplots()
    positions = list(range(len(methods)))
    for pos, method in zip(positions, methods, strict=True):
        values = [100 * v for v in spread[method].values if not math.isnan(v)]
        if not values:
            continue
        axes.boxplot(
            [values],
            positions=[pos],
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            boxprops={"facecolor": COLOURS[method], "alpha": 0.35},
            medianprops={"color": "black"},
        )
        jitter = [((i % 5) - 2) * 0.05 for i in range(len(values))]
        axes.scatter([pos + j for j in jitter], values, s=18, color=COLOURS[method], zorder=3)
        axes.scatter([pos], [100 * spread[method].mean], marker="D", color="black", zorder=4)
    labels = []
    for method in methods:
        mean, std = 100 * spread[method].mean, 100 * spread[method].std
        shown = (
            NA if math.isnan(mean) else f"{mean:.1f}" + ("" if math.isnan(std) else f" ± {std:.1f}")
        )
        labels.append(f"{LABELS[method]}\n{shown}")
    axes.set_xticks(positions)
    axes.set_xticklabels(labels, fontsize=10)
    axes.set_ylim(-2, 102)  # points at 0 or 100 stay whole
    axes.set_ylabel("Accuracy (%)", fontsize=11)
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    axes.set_title(
        f"{study.group}: {len(study.members)} tasks, {run.model}\n(points: tasks; box: "
        "quartiles; diamond: mean; below: mean ± sample std)",
        fontsize=11,
    )
    return _save(fig, path, dpi)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")


def figure_name(run: RunResults) -> str:
    """``figure_<model>.png`` with the model name reduced to safe characters."""
    return f"figure_{_slug(run.model) or 'model'}.png"


def study_figure_name(run: RunResults, study: Study) -> str:
    """``figure_<model>_<study group>.png``."""
    return f"figure_{_slug(run.model) or 'model'}_{_slug(study.group)}.png"


def competition_figure_name(label: str) -> str:
    """``figure_<model>_pma.png`` (``label``: a model as ``competition_groups`` names it)."""
    return f"figure_{_slug(label) or 'model'}_pma.png"


def _mass_label(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 else f"{value:.0e}"


def plot_competition(
    label: str,
    found: Sequence[Competition],
    path: str | PathLike,
    *,
    dpi: int = DPI,
) -> Path:
    """Write one model's figure as PNG: a panel per task of ``found`` (four across),
    DC-PMI's gain over LM in each PMA quartile with its 95% interval (Newcombe), each
    quartile labelled by its median PMA (the tasks' masses differ by orders of magnitude,
    so each panel has its own); green above zero, red below, hollow where the quartile's
    gain is not significant (McNemar, p >= 0.05). A falling row of bars is the thesis."""
    columns = min(4, max(1, len(found)))
    rows = max(1, math.ceil(len(found) / columns))
    width, height = COMPETITION_PANEL
    fig = _figure((max(6.0, width * columns), 1.0 + height * rows), dpi)
    panels = fig.subplots(rows, columns, sharey=True, squeeze=False)
    for index, axes in enumerate(panels.flat):
        if index >= len(found):
            axes.set_visible(False)
            continue
        c = found[index]
        x = list(range(len(c.quartiles)))
        for pos, q in zip(x, c.quartiles, strict=True):
            d = q.comparison.difference
            colour = GAIN_COLOUR if d.value > 0 else LOSS_COLOUR if d.value < 0 else EVEN_COLOUR
            axes.bar(
                pos,
                100 * d.value,
                0.6,
                color=colour if q.comparison.significant else "white",
                edgecolor=colour,
                linewidth=1.2,
            )
            axes.errorbar(
                pos,
                100 * d.value,
                yerr=[[100 * (d.value - d.low)], [100 * (d.high - d.value)]],
                color="black",
                elinewidth=0.8,
                capsize=2,
            )
        axes.axhline(0, color="black", linewidth=0.8)
        axes.set_xticks(x)
        axes.set_xticklabels([_mass_label(q.median) for q in c.quartiles], fontsize=8)
        trend = "" if math.isnan(c.trend) else f", trend {c.trend:+.2f}"
        axes.set_title(f"{c.task.removeprefix('dcpmi_')}{trend}", fontsize=10)
        axes.grid(axis="y", alpha=0.3)
        axes.set_axisbelow(True)
    for axes in panels[:, 0]:
        axes.set_ylabel("DC-PMI - LM (points)", fontsize=9)
    fig.suptitle(
        f"Surface form competition: {label}\nDC-PMI's gain over LM by PMA quartile (x: the "
        "quartile's median PMA, lowest first; 95% intervals; hollow: McNemar p >= 0.05)",
        fontsize=11,
    )
    return _save(fig, path, dpi)
