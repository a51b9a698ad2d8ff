"""Tables and figures like the DC-PMI paper's, from lm-eval results files.

``dcpmi report RESULTS... [--out DIR]`` reads the ``results_*.json`` files that
``lm_eval ... --output_path DIR`` writes and shows, per model, the accuracy of the
paper's four decision rules on every ``dcpmi_*`` task:

* **Unc** (``acc_unc``): the option's probability after the domain premise alone;
* **LM** (``acc``): log P(option | premise), lm-eval's usual ``acc``;
* **Avg** (``acc_avg``): the same, divided by the option's token count;
* **DC-PMI** (``acc_dcpmi``): log P(option | premise) - log P(option | domain premise).

Outputs (all optional, see ``report_command``):

* ``report.md`` / ``report.csv``: a table per model, a row per task in the paper's
  order (unknown tasks after, alphabetically; a group's mean row last), accuracy in
  percent with one decimal, the best method of each row marked (ties too);
* ``summary.md`` / ``summary.csv`` (two or more runs): the share of tasks on which
  each method is best or tied, per model and overall, like the paper's summary;
* ``figure_<model>.png``: one figure per model, 1200x800 pixels.

"Best" is decided on the numbers as shown (percent, one decimal), so two methods
that print the same are tied. ``n/a`` (``acc_avg`` without a known tokenizer) is
never best. Only the standard library and, for figures, matplotlib are used;
nothing here imports lm-eval or torch.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Column order of the paper's tables, and the labels it uses.
METHODS = ("acc_unc", "acc", "acc_avg", "acc_dcpmi")
LABELS = {"acc_unc": "Unc", "acc": "LM", "acc_avg": "Avg", "acc_dcpmi": "DC-PMI"}
# One colour per method, the same in every figure.
COLOURS = {"acc_unc": "#8c8c8c", "acc": "#1f77b4", "acc_avg": "#ff7f0e", "acc_dcpmi": "#2ca02c"}
GAIN_COLOUR, LOSS_COLOUR, EVEN_COLOUR = "#2ca02c", "#d62728", "#8c8c8c"

# The paper's task order (Holtzman et al., 2021, Table 2).
PAPER_ORDER = (
    "dcpmi_copa",
    "dcpmi_storycloze",
    "dcpmi_hellaswag",
    "dcpmi_race_m",
    "dcpmi_race_h",
    "dcpmi_arc_easy",
    "dcpmi_arc_challenge",
    "dcpmi_obqa",
    "dcpmi_cqa",
    "dcpmi_boolq",
    "dcpmi_rte",
    "dcpmi_cb",
    "dcpmi_sst2",
    "dcpmi_sst5",
    "dcpmi_agn",
    "dcpmi_trec",
)
_PAPER_RANK = {name: i for i, name in enumerate(PAPER_ORDER)}

FIGSIZE = (12.0, 8.0)  # inches
DPI = 100  # -> 1200 x 800 pixels
FORMATS = ("md", "csv", "png")
NA = "n/a"


class ReportError(ValueError):
    """Input that cannot be reported on; the message (one line) names the file and why."""


# ---------------------------------------------------------------------------
# Data


@dataclass
class TaskRow:
    """One row of a model's table: a task, or a group's aggregated (mean) row."""

    task: str
    scores: dict[str, float]  # method -> accuracy in [0, 1]; NaN when not computed
    n: int | None = None  # documents scored
    n_total: int | None = None  # documents in the task's evaluation split
    truncated: float | None = None  # requests longer than the model's context (NaN: unknown)
    is_group: bool = False

    @property
    def label(self) -> str:
        return f"{self.task} (mean)" if self.is_group else self.task

    def shown(self, method: str) -> float:
        """The accuracy as displayed: percent rounded to one decimal (NaN stays NaN)."""
        return _percent(self.scores.get(method, math.nan))

    @property
    def best(self) -> tuple[str, ...]:
        """Methods with the highest displayed accuracy (several on a tie; NaN never wins)."""
        shown = {m: self.shown(m) for m in METHODS}
        valid = [v for v in shown.values() if not math.isnan(v)]
        if not valid:
            return ()
        top = max(valid)
        return tuple(m for m in METHODS if shown[m] == top)

    @property
    def limited(self) -> bool:
        return self.n is not None and self.n_total is not None and self.n < self.n_total


@dataclass
class RunResults:
    """The DC-PMI rows of one lm-eval results file (one model, one run)."""

    model: str  # display name, unique among the runs of one report
    rows: list[TaskRow]  # in report order: tasks (paper order), then group rows
    source: Path | None = None
    limit: float | None = None  # lm-eval's --limit, when the run used one
    n_shot: dict[str, Any] = field(default_factory=dict)

    @property
    def tasks(self) -> list[TaskRow]:
        """The task rows, without group rows."""
        return [row for row in self.rows if not row.is_group]

    @property
    def limited(self) -> bool:
        """True when the run scored fewer documents than the tasks hold (``--limit``)."""
        return self.limit is not None or any(row.limited for row in self.rows)


def _percent(value: float) -> float:
    if value is None or math.isnan(value):
        return math.nan
    return round(100.0 * value, 1)


def _fmt(value: float) -> str:
    shown = _percent(value)
    return NA if math.isnan(shown) else f"{shown:.1f}"


def _number(value: Any) -> float:
    """A metric value as float; anything that is not a number ("N/A", None) is NaN."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)  # numpy scalars, numeric strings
    except (TypeError, ValueError):
        return math.nan


def _metric(entry: Mapping[str, Any], metric: str) -> float | None:
    """``entry["<metric>,<filter>"]`` (filter ``none`` first); None when the metric is absent."""
    key = f"{metric},none"
    if key in entry:
        return _number(entry[key])
    for key, value in entry.items():
        if isinstance(key, str) and key.partition(",")[0] == metric and "," in key:
            return _number(value)
    return None


def _task_sort_key(name: str) -> tuple[int, str]:
    return (_PAPER_RANK.get(name, len(PAPER_ORDER)), name)


def _int_or_none(value: Any) -> int | None:
    number = _number(value)
    return None if math.isnan(number) else int(number)


def _leaf_tasks(group: str, subtasks: Mapping[str, Any], seen: set[str] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    leaves: list[str] = []
    for child in subtasks.get(group) or []:
        if child in seen:
            continue
        seen.add(child)
        if child in subtasks:
            leaves += _leaf_tasks(child, subtasks, seen)
        else:
            leaves.append(child)
    return leaves


def _model_args(config: Mapping[str, Any]) -> dict[str, Any]:
    args = config.get("model_args")
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str):
        pairs = (item.partition("=") for item in args.split(",") if "=" in item)
        return {key.strip(): value.strip() for key, _eq, value in pairs}
    return {}


def model_label(data: Mapping[str, Any]) -> str:
    """A short display name for the model of a results dict.

    The GGUF file name (without ``.gguf``) when the run loaded one; else lm-eval's
    ``model_name`` or the ``pretrained=`` model argument, with a local folder shortened
    to its last component (Hub ids such as ``EleutherAI/pythia-160m`` stay whole).
    """
    config = data.get("config") if isinstance(data.get("config"), Mapping) else {}
    args = _model_args(config)
    gguf = args.get("gguf_file")
    if isinstance(gguf, str) and gguf:
        return re.sub(r"\.gguf$", "", Path(gguf).name)
    name = data.get("model_name") or args.get("pretrained") or args.get("model")
    if not isinstance(name, str) or not name:
        return str(config.get("model") or "model")
    if name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1:
        return Path(name.rstrip("/\\")).name or name
    return name


def run_from_dict(data: Any, source: str | PathLike | None = None) -> RunResults:
    """The DC-PMI rows of an lm-eval results dict (a results file's JSON, or what
    ``lm_eval.simple_evaluate`` returns). Raises ``ReportError`` when it is not one or
    holds no DC-PMI task (no task with ``acc``, ``acc_avg``, ``acc_unc`` and ``acc_dcpmi``).
    """
    where = str(source) if source is not None else "results"
    if not isinstance(data, Mapping) or not isinstance(data.get("results"), Mapping):
        raise ReportError(
            f"{where}: not an lm-eval results file (no 'results' object; expected the "
            "results_<date>.json that `lm_eval ... --output_path DIR` writes)"
        )
    results: Mapping[str, Any] = data["results"]
    subtasks = data.get("group_subtasks") if isinstance(data.get("group_subtasks"), Mapping) else {}
    groups = set(subtasks) | set(data.get("groups") or {})
    n_samples = data.get("n-samples") if isinstance(data.get("n-samples"), Mapping) else {}

    task_rows: list[TaskRow] = []
    group_rows: list[TaskRow] = []
    for name, entry in results.items():
        if not isinstance(entry, Mapping):
            continue
        values = {method: _metric(entry, method) for method in METHODS}
        if any(value is None for value in values.values()):
            continue
        truncated = _metric(entry, "truncated")
        row = TaskRow(
            task=str(name),
            scores={m: float(v) for m, v in values.items() if v is not None},
            truncated=truncated,
            is_group=name in groups,
        )
        counts = n_samples.get(name)
        if isinstance(counts, Mapping):
            row.n = _int_or_none(counts.get("effective"))
            row.n_total = _int_or_none(counts.get("original"))
        if row.n is None:
            row.n = _int_or_none(entry.get("sample_len"))
        (group_rows if row.is_group else task_rows).append(row)

    if not task_rows and not group_rows:
        names = ", ".join(sorted(str(k) for k in results)) or "none"
        raise ReportError(
            f"{where}: holds no DC-PMI task (tasks: {names}); a DC-PMI task reports acc, "
            "acc_avg, acc_unc and acc_dcpmi - evaluate the dcpmi_* tasks (group `dcpmi`)"
        )

    by_name = {row.task: row for row in task_rows}
    for group in group_rows:
        leaves = [by_name[t] for t in _leaf_tasks(group.task, subtasks) if t in by_name]
        if leaves and all(r.n is not None and r.n_total is not None for r in leaves):
            group.n = sum(r.n for r in leaves)  # type: ignore[misc]
            group.n_total = sum(r.n_total for r in leaves)  # type: ignore[misc]

    config = data.get("config") if isinstance(data.get("config"), Mapping) else {}
    limit = config.get("limit")
    limit = None if limit is None or math.isnan(_number(limit)) else _number(limit)
    shots = data.get("n-shot") if isinstance(data.get("n-shot"), Mapping) else {}
    rows = sorted(task_rows, key=lambda r: _task_sort_key(r.task))
    rows += sorted(group_rows, key=lambda r: r.task)
    return RunResults(
        model=model_label(data),
        rows=rows,
        source=Path(source) if source is not None else None,
        limit=limit,
        n_shot={r.task: shots[r.task] for r in rows if r.task in shots},
    )


# ---------------------------------------------------------------------------
# Loading files


def _read_results_file(path: Path) -> RunResults:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not an lm-eval results file (not UTF-8 text)") from None
    except OSError as error:
        raise ReportError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(f"{path}: not an lm-eval results file (not JSON: {error})") from None
    return run_from_dict(data, path)


def _results_in_folder(folder: Path) -> list[RunResults]:
    """Newest DC-PMI results file of every folder under ``folder`` (see ``load_results``)."""
    by_folder: dict[Path, list[Path]] = {}
    for path in folder.rglob("results_*.json"):
        if path.is_file():
            by_folder.setdefault(path.parent, []).append(path)
    if not by_folder:
        raise ReportError(
            f"{folder}: no results_*.json under this folder (give the --output_path "
            "folder of an lm_eval run, or results files)"
        )
    runs: list[RunResults] = []
    skipped: list[str] = []
    for parent in sorted(by_folder):
        # results_<ISO date>.json: the name sorts by date; the mtime breaks ties.
        candidates = sorted(
            by_folder[parent], key=lambda p: (p.name, p.stat().st_mtime), reverse=True
        )
        for path in candidates:
            try:
                runs.append(_read_results_file(path))
                break
            except ReportError as error:
                skipped.append(str(error))
                log.warning("skipped %s", error)
    if not runs:
        raise ReportError(
            f"{folder}: no DC-PMI results under this folder ({len(skipped)} results file(s) "
            f"skipped; first: {skipped[0]})"
        )
    return runs


def _unique_names(runs: list[RunResults]) -> None:
    """Give runs of the same model distinct names (the date of their results file)."""
    counts: dict[str, int] = {}
    for one in runs:
        counts[one.model] = counts.get(one.model, 0) + 1
    taken: set[str] = set()
    for number, one in enumerate(runs, start=1):
        if counts[one.model] > 1:
            stamp = str(number)
            if one.source is not None:
                match = re.search(r"(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)", one.source.name)
                stamp = match.group(1) if match else one.source.stem
            name = f"{one.model} [{stamp}]"
            if name in taken:
                name = f"{one.model} [{stamp} #{number}]"
            one.model = name
        taken.add(one.model)


def load_results(paths: str | PathLike | Iterable[str | PathLike]) -> list[RunResults]:
    """Read lm-eval results files and/or output folders into one ``RunResults`` per run.

    * A **file** must be an lm-eval results file (JSON with a ``results`` object) that
      holds at least one DC-PMI task; otherwise ``ReportError`` names the file and why.
    * A **folder** (an ``--output_path``) is searched recursively for ``results_*.json``.
      lm-eval writes one subfolder per model and a new file per run; of every
      subfolder only the **newest** file (by the date in its name) that holds a DC-PMI
      task is read, so re-running a model replaces its row instead of doubling it.
      Files there that are not readable DC-PMI results are skipped with a warning;
      ``ReportError`` only when none is left. To report several runs of the same
      model, pass their files explicitly.

    Runs keep the order of ``paths`` (folders: subfolders alphabetically). The same
    file given twice is read once. Runs of the same model get the date of their file
    appended to their name, so every run's name is unique.
    """
    if isinstance(paths, (str, PathLike)):
        paths = [paths]
    runs: list[RunResults] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            found = _results_in_folder(path)
        elif path.is_file():
            found = [_read_results_file(path)]
        else:
            raise ReportError(f"{path}: no such file or folder")
        for run in found:
            key = run.source.resolve() if run.source is not None else None
            if key is not None and key in seen:
                continue
            if key is not None:
                seen.add(key)
            runs.append(run)
    if not runs:
        raise ReportError("no results files given")
    _unique_names(runs)
    return runs


# ---------------------------------------------------------------------------
# Tables


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _limit_text(limit: float) -> str:
    return str(int(limit)) if float(limit).is_integer() else f"{limit:g}"


def _notes(run: RunResults) -> list[str]:
    notes: list[str] = []
    if run.limited:
        limited = [r for r in run.tasks if r.limited]
        detail = ", ".join(f"{r.task} {r.n} of {r.n_total}" for r in limited[:4])
        if len(limited) > 4:
            detail += f", and {len(limited) - 4} more"
        flag = f"--limit {_limit_text(run.limit)}" if run.limit is not None else "--limit"
        notes.append(
            f"**Partial run ({flag})**: not every document was scored"
            + (f" ({detail})" if detail else "")
            + "; not comparable with full-set accuracies."
        )
    if any(math.isnan(r.scores.get("acc_avg", math.nan)) for r in run.rows):
        notes.append(
            "Avg is n/a where no tokenizer was known (give `pretrained=` or `tokenizer=` in "
            "--model_args or --metadata)."
        )
    truncated = [
        r
        for r in run.tasks
        if r.truncated is not None and not math.isnan(r.truncated) and r.truncated
    ]
    if truncated:
        notes.append(
            "Requests longer than the model's context (truncated): "
            + ", ".join(f"{r.task} {int(r.truncated)}" for r in truncated)  # type: ignore[arg-type]
            + "."
        )
    shots = {t: k for t, k in run.n_shot.items() if k not in (0, None, "0")}
    if shots:
        notes.append("Few-shot: " + ", ".join(f"{t} {k}-shot" for t, k in shots.items()) + ".")
    return notes


def _n_text(row: TaskRow) -> str:
    if row.n is None:
        return NA
    return f"{row.n} / {row.n_total}" if row.limited else str(row.n)


def markdown_table(run: RunResults) -> str:
    """The run's table in Markdown (GitHub flavour), best of each row in bold."""
    lines = [
        "| Task | n | " + " | ".join(LABELS[m] for m in METHODS) + " |",
        "|:---|---:|" + "---:|" * len(METHODS),
    ]
    for row in run.rows:
        best = row.best
        cells = []
        for method in METHODS:
            text = _fmt(row.scores.get(method, math.nan))
            cells.append(f"**{text}**" if method in best else text)
        label = f"*{_md_cell(row.label)}*" if row.is_group else _md_cell(row.label)
        lines.append(f"| {label} | {_n_text(row)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_report(runs: Sequence[RunResults], *, title: bool = True) -> str:
    """A section per run (heading, table, notes); with several runs, the summary after."""
    parts: list[str] = []
    if title:
        parts.append(
            "# DC-PMI report\n\nAccuracy (%) of the four scoring methods (Holtzman et al., "
            "2021): Unc = log P(option | domain premise), LM = log P(option | premise), Avg = "
            "LM per option token, DC-PMI = LM - Unc. Best per task in **bold** (ties too).\n"
        )
    for run in runs:
        section = [f"## {_md_cell(run.model)}\n"]
        if run.source is not None:
            section.append(f"Source: `{run.source}`\n")
        section.append(markdown_table(run))
        notes = _notes(run)
        if notes:
            section.append("\n".join(f"- {note}" for note in notes) + "\n")
        parts.append("\n".join(section))
    if len(runs) > 1:
        parts.append("## Best method, share of tasks\n\n" + summary_markdown(runs))
    return "\n".join(parts)


def _csv(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(rows)
    return buffer.getvalue()


CSV_HEADER = (
    "model",
    "task",
    "is_group",
    "n",
    "n_total",
    *(LABELS[m] for m in METHODS),
    "best",
    "truncated",
    "limit",
)


def csv_report(runs: Sequence[RunResults]) -> str:
    """All runs' rows as CSV: accuracy in percent, one decimal, ``n/a`` for NaN;
    ``best`` lists the winning methods separated by ``;`` (several on a tie)."""
    rows: list[Sequence[Any]] = [CSV_HEADER]
    for run in runs:
        for row in run.rows:
            truncated = row.truncated
            rows.append(
                (
                    run.model,
                    row.task,
                    int(row.is_group),
                    "" if row.n is None else row.n,
                    "" if row.n_total is None else row.n_total,
                    *(_fmt(row.scores.get(m, math.nan)) for m in METHODS),
                    ";".join(LABELS[m] for m in row.best),
                    "" if truncated is None or math.isnan(truncated) else int(truncated),
                    "" if run.limit is None else _limit_text(run.limit),
                )
            )
    return _csv(rows)


def format_run_table(results: Mapping[str, Any]) -> str:
    """The Markdown table (and notes) of an in-memory lm-eval results dict, as returned
    by ``lm_eval.simple_evaluate``; for ``dcpmi run`` to print at the end of a run.
    Raises ``ReportError`` when the dict holds no DC-PMI task."""
    run = run_from_dict(results, None)
    heading = f"Model: {run.model} (best per task in **bold**)\n\n"
    notes = _notes(run)
    return (
        heading
        + markdown_table(run)
        + ("\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else "")
    )


# ---------------------------------------------------------------------------
# Summary across runs


@dataclass
class Share:
    wins: int  # tasks on which the method is best or tied
    tasks: int

    @property
    def percent(self) -> float:
        return 100.0 * self.wins / self.tasks if self.tasks else math.nan


def summary(runs: Sequence[RunResults]) -> dict[str, dict[str, Share]]:
    """``{method: {model: Share, ..., "overall": Share}}``: on how many tasks each method
    is best or tied. Group (mean) rows are not tasks and do not count; "overall" pools
    every (model, task) pair."""
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
    header = "| Method | " + " | ".join(_md_cell(c) for c in columns) + " |"
    lines = [header, "|:---|" + "---:|" * len(columns)]
    for method in METHODS:
        lines.append(
            f"| {LABELS[method]} | "
            + " | ".join(_share_text(table[method][c]) for c in columns)
            + " |"
        )
    return "\n".join(lines) + "\n"


def summary_csv(runs: Sequence[RunResults]) -> str:
    """CSV of ``summary_markdown``: cells are percentages (one decimal); a last row
    ``tasks`` gives how many tasks each column counts."""
    table = summary(runs)
    columns = [run.model for run in runs] + ["overall"]
    rows: list[Sequence[Any]] = [("method", *columns)]
    for method in METHODS:
        rows.append(
            (
                LABELS[method],
                *(
                    NA if not table[method][c].tasks else f"{table[method][c].percent:.1f}"
                    for c in columns
                ),
            )
        )
    rows.append(("tasks", *(table[METHODS[0]][c].tasks for c in columns)))
    return _csv(rows)


# ---------------------------------------------------------------------------
# Figures


def _short_task(row: TaskRow) -> str:
    name = row.task[len("dcpmi_") :] if row.task.startswith("dcpmi_") else row.task
    return f"{name} (mean)" if row.is_group else name


def dcpmi_gain(row: TaskRow) -> float:
    """DC-PMI minus the best other method, in points (as displayed); NaN if undefined."""
    others = [row.shown(m) for m in METHODS if m != "acc_dcpmi"]
    others = [v for v in others if not math.isnan(v)]
    own = row.shown("acc_dcpmi")
    if not others or math.isnan(own):
        return math.nan
    return round(own - max(others), 1)


def plot_run(
    run: RunResults,
    path: str | PathLike,
    *,
    figsize: tuple[float, float] = FIGSIZE,
    dpi: int = DPI,
) -> Path:
    """Write the run's figure as PNG, ``figsize * dpi`` pixels (1200x800 by default).

    Top: grouped bars per task (Unc, LM, Avg, DC-PMI; fixed colours; ``n/a`` written
    where a value is missing). Bottom: DC-PMI minus the best other method, in points
    (green above zero, red below). Uses matplotlib's Agg canvas directly, so it works
    without a display and leaves pyplot's global state alone.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the install
        raise ReportError("figures need matplotlib: pip install 'lm-eval-dcpmi[report]'") from None

    rows = run.rows
    x = list(range(len(rows)))
    width = 0.8 / len(METHODS)
    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})

    for i, method in enumerate(METHODS):
        offsets = [pos + (i - (len(METHODS) - 1) / 2) * width for pos in x]
        values = [row.shown(method) for row in rows]
        heights = [0.0 if math.isnan(v) else v for v in values]
        top.bar(offsets, heights, width, label=LABELS[method], color=COLOURS[method])
        for pos, value in zip(offsets, values, strict=True):
            if math.isnan(value):
                top.text(pos, 1, NA, rotation=90, ha="center", va="bottom", fontsize=8)
    top.set_ylim(0, 112)  # room for the legend above 100 %
    top.set_yticks(range(0, 101, 20))
    top.set_ylabel("Accuracy (%)", fontsize=11)
    top.grid(axis="y", alpha=0.3)
    top.set_axisbelow(True)
    top.legend(ncols=len(METHODS), loc="upper right", fontsize=10, frameon=False)
    title = f"DC-PMI report: {run.model}"
    if run.limited:
        title += f" (partial run, --limit {_limit_text(run.limit)})" if run.limit else " (partial)"
    top.set_title(title, fontsize=13)

    gains = [dcpmi_gain(row) for row in rows]
    colours = [
        EVEN_COLOUR if math.isnan(g) or g == 0 else GAIN_COLOUR if g > 0 else LOSS_COLOUR
        for g in gains
    ]
    bottom.bar(x, [0.0 if math.isnan(g) else g for g in gains], 0.6, color=colours)
    bottom.axhline(0, color="black", linewidth=0.8)
    finite = [abs(g) for g in gains if not math.isnan(g)]
    span = max([*finite, 1.0]) * 1.3
    bottom.set_ylim(-span, span)
    for pos, gain in zip(x, gains, strict=True):
        text = NA if math.isnan(gain) else f"{gain:+.1f}"
        y = 0 if math.isnan(gain) else gain
        bottom.text(pos, y, text, ha="center", va="bottom" if y >= 0 else "top", fontsize=9)
    bottom.set_ylabel("DC-PMI - best other\n(points)", fontsize=11)
    bottom.grid(axis="y", alpha=0.3)
    bottom.set_axisbelow(True)
    bottom.set_xticks(x)
    bottom.set_xticklabels([_short_task(row) for row in rows], rotation=30, ha="right", fontsize=10)
    slots = max(len(rows), 4)  # a lone task keeps bars of a normal width, centred
    centre = (len(rows) - 1) / 2
    bottom.set_xlim(centre - slots / 2 - 0.1, centre + slots / 2 + 0.1)
    n_tasks = len(run.tasks)
    if 0 < n_tasks < len(rows):  # a dashed line between the tasks and the group rows
        for axes in (top, bottom):
            axes.axvline(n_tasks - 0.5, color="black", linestyle="--", linewidth=0.8)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    return path


def figure_name(run: RunResults) -> str:
    """``figure_<model>.png`` with the model name reduced to safe characters."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", run.model).strip("._") or "model"
    return f"figure_{slug}.png"


# ---------------------------------------------------------------------------
# Command


def _matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def report_command(
    paths: Sequence[str | PathLike],
    out_dir: str | PathLike | None = None,
    formats: Iterable[str] | None = None,
    *,
    stdout: Any = None,
    stderr: Any = None,
) -> int:
    """Print the Markdown report of ``paths`` and, with ``out_dir``, write its files.

    Writes into ``out_dir`` (created if needed), by format: ``md`` -> ``report.md`` (and
    ``summary.md`` with several runs), ``csv`` -> ``report.csv`` (and ``summary.csv``),
    ``png`` -> ``figure_<model>.png`` per run. ``formats=None`` means all three, PNG
    skipped with a note when matplotlib is missing; naming ``png`` explicitly makes a
    missing matplotlib an error. Without ``out_dir`` nothing is written.
    Returns 0, or 2 after printing ``dcpmi report: error: ...`` for bad input.
    """
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    explicit = formats is not None
    chosen = list(FORMATS if formats is None else formats)
    try:
        unknown = [f for f in chosen if f not in FORMATS]
        if unknown:
            raise ReportError(f"unknown format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
        runs = load_results(paths)
        text = markdown_report(runs)
        stdout.write(text)
        if out_dir is None:
            return 0
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        if "md" in chosen:
            written.append(_write(out / "report.md", text))
            if len(runs) > 1:
                written.append(_write(out / "summary.md", summary_markdown(runs)))
        if "csv" in chosen:
            written.append(_write(out / "report.csv", csv_report(runs)))
            if len(runs) > 1:
                written.append(_write(out / "summary.csv", summary_csv(runs)))
        if "png" in chosen:
            if explicit or _matplotlib_available():
                for run in runs:
                    written.append(plot_run(run, out / figure_name(run)))
            else:
                stderr.write("dcpmi report: no figures (pip install 'lm-eval-dcpmi[report]')\n")
        for path in written:
            stderr.write(f"dcpmi report: wrote {path}\n")
    except ReportError as error:
        stderr.write(f"dcpmi report: error: {error}\n")
        return 2
    except OSError as error:  # an --out folder that cannot be written
        where = f"{error.filename}: " if error.filename else ""
        stderr.write(f"dcpmi report: error: {where}{error.strerror or error}\n")
        return 2
    return 0


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``dcpmi report``'s arguments to ``parser`` (a subcommand's parser)."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RESULTS",
        help="lm-eval results_*.json files or --output_path folders (of a folder, the "
        "newest DC-PMI results file of every model subfolder)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="write report.md/.csv, summary.md/.csv (several runs) and figure_<model>.png here",
    )
    parser.add_argument(
        "--format",
        dest="formats",
        metavar="FMT",
        action="append",
        default=None,
        help="only these outputs: md, csv, png (repeat or comma-separate; default all)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``dcpmi report`` with arguments parsed by a parser set up by ``add_arguments``."""
    formats = None
    if args.formats:
        formats = [f.strip() for item in args.formats for f in item.split(",") if f.strip()]
    return report_command(args.paths, args.out, formats)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lm_eval_dcpmi.report RESULTS... [--out DIR]`` (same as ``dcpmi report``)."""
    parser = argparse.ArgumentParser(
        prog="dcpmi report", description="Paper-style tables and figures from lm-eval results."
    )
    return run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
