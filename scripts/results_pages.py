"""The committed results pages: each results set's report in ``results/<set>/`` and the
results tables of README.md and docs/*.md, from the committed results files
(``scripts/make_results.py`` writes and checks them; a checkout's tool, not in the wheel).

A set is a folder ``results/<set>/`` holding lm-eval results files ``results_*.json`` (with
any ``samples_<task>_<date>.jsonl[.gz]`` that ``--log_samples`` wrote beside them). Each set
is one report: ``dcpmi report <its results files> --out results/<set>`` writes
``report.md``, ``report.csv``, the figures (and ``intervals.csv`` with samples,
``summary.*`` with several models); outputs left from an earlier run are removed.

In README.md and docs/*.md, the text between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->`` is replaced: NAME ``<set>`` gives a caption and the main table
of every run in the set (with a mean row; ``+figure`` after the name embeds the run's
figure), NAME ``<set>/<study group or task>`` that study's or task's table, and
``+calibration``, ``+priors`` or ``+competition`` the set's CC/BC table, priors table, or
surface form competition table (PMA and DC-PMI's gain by PMA quartile, with its figure),
and ``+default_premise`` the last-word premise against the paper's, per task.
A set with no results file gives a placeholder saying where to put one.

Nothing here loads a model or imports lm-eval (only ``lm_eval_dcpmi.report``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi import report
from lm_eval_dcpmi.report import (
    _comparisons as comparisons,
)
from lm_eval_dcpmi.report import (
    _competition as competition,
)
from lm_eval_dcpmi.report import (
    _studies as studies,
)
from lm_eval_dcpmi.report._figures import competition_figure_name, figure_name
from lm_eval_dcpmi.report._formatting import value_text
from lm_eval_dcpmi.report._output import FORMATS, write_outputs
from lm_eval_dcpmi.report._results import METHODS, RunResults, number

# The repository's root: the pages are a checkout's (docs/, README.md, results/).
ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("results")  # relative to ROOT: report.md names its sources this way
PAGES = ("README.md", "docs/*.md")
INPUTS = ("results_*.json", "samples_*.json", "samples_*.jsonl", "samples_*.jsonl.gz")

OUTPUTS = (
    "report.md",
    "report.csv",
    "summary.md",
    "summary.csv",
    "intervals.csv",
    "competition.csv",
    "*.png",
)
BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w./-]+)(?P<options>(?: \+\w+)*) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.S,
)


@contextmanager
def _in(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def result_sets(root: Path = ROOT) -> dict[str, list[Path]]:
    """``{set: its results files}``, paths relative to ``root``, sets and files sorted."""
    sets = {}
    folder = root / RESULTS
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        files = sorted(sub.glob("results_*.json"))
        if files:
            sets[sub.name] = [f.relative_to(root) for f in files]
    return sets


# What else results/ holds: its README, the benchmarks' records (results/benchmarks) and the
# catalogue sweep's (results/catalogue, scripts/sweep_catalogue.py).
NOT_SETS = ("README.md", "benchmarks", "catalogue")


def set_files(folder: Path) -> set[Path]:
    """Every file of the results sets under ``folder``, relative to it (``NOT_SETS`` aside)."""
    files = (p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    return {p for p in files if p.parts[0] not in NOT_SETS}


def is_input(path: Path) -> bool:
    return any(path.match(pattern) for pattern in INPUTS)


def write_reports(out: Path, root: Path = ROOT) -> list[Path]:
    """``dcpmi report`` of every set into ``out/<set>`` (``out`` relative to ``root`` or
    absolute); removes the outputs of an earlier run that this one did not make. Returns
    the files written."""
    written: list[Path] = []
    with _in(root):
        for name, files in result_sets(root).items():
            target = out / name
            runs = report.load_results([str(f) for f in files])
            made = write_outputs(runs, report.markdown_report(runs), target, FORMATS, True)
            for path in set(target.iterdir()) - set(made):
                if path.is_file() and not is_input(path) and any(path.match(g) for g in OUTPUTS):
                    path.unlink()
            written += made
    return written


# ---------------------------------------------------------------- Markdown blocks


def _link(target: Path, page: Path) -> str:
    """``target`` (relative to the root) as a link from the page ``page``."""
    return Path(os.path.relpath(target, page.parent)).as_posix()


def _mean_row(run: RunResults) -> str:
    tasks = run.tasks
    cells = []
    for method in METHODS:
        values = [row.scores.get(method) for row in tasks]
        if any(v is None for v in values):
            cells.append(value_text(None))
        else:
            cells.append(value_text(math.fsum(values) / len(values)))  # type: ignore[arg-type]
    return f"| *mean ({len(tasks)} tasks)* | | " + " | ".join(cells) + " |"


def join_parts(runs: list[RunResults]) -> list[tuple[RunResults, list[RunResults]]]:
    """``(run, its parts)``: the runs of one model over disjoint tasks (a suite scored in
    several runs, e.g. ``results/full``) joined into one run whose rows are all their
    tasks in paper order; any other run alone."""
    by_model: dict[str, list[RunResults]] = {}
    for run in runs:
        by_model.setdefault(run.model_name, []).append(run)
    order = {task: i for i, task in enumerate(paper.paper_order())}
    joined = []
    for group in by_model.values():
        tasks = [row.task for run in group for row in run.main_rows]
        plain = all(run.main_rows == run.tasks and not run.studies for run in group)
        if len(group) > 1 and plain and len(tasks) == len(set(tasks)):
            rows = sorted(
                (row for run in group for row in run.tasks),
                key=lambda row: order.get(row.task, len(order)),
            )
            joined.append((dataclasses.replace(group[0], rows=rows), group))
        else:
            joined += [(run, [run]) for run in group]
    return joined


def _documents(run: RunResults) -> str:
    n = sum(row.n or 0 for row in run.tasks)
    total = sum(row.n_total or row.n or 0 for row in run.tasks)
    return f"{n:,} documents" if n == total else f"{n:,} of {total:,} documents"


def _parts_caption(run: RunResults, parts: list[RunResults], page: Path) -> str:
    documents = _documents(run)
    models = sorted({str((part.data.get("config") or {}).get("model", "?")) for part in parts})
    sources = [part.source for part in parts if part.source is not None]
    files = [f"[{source.name}]({_link(source, page)})" for source in sources]
    folder = sources[0].parent
    if len(files) > 4:  # a suite scored one task per run: the folder, not each file
        where = f"results files in [{folder.as_posix()}]({_link(folder, page)})"
    else:
        where = "results files " + ", ".join(files)
    return (
        f"`{run.model_name}`, lm-eval model `{'`, `'.join(models)}`, {documents} of "
        f"{len(run.tasks)} tasks, scored in {len(parts)} runs ({where}); "
        f"[report]({_link(folder / 'report.md', page)})."
    )


def _caption(run: RunResults, page: Path) -> str:
    config = run.data.get("config") or {}
    source = run.source
    assert source is not None
    stamp = re.search(r"\d{4}-\d\d-\d\d", source.name)
    documents = _documents(run)
    limit = number(config.get("limit"))
    if not math.isnan(limit):
        documents += f" (`--limit {limit:g}`)"
    folder = source.parent
    parts = [
        f"`{run.model_name}`, lm-eval model `{config.get('model', '?')}`, {documents}",
        *([f"run {stamp.group(0)}"] if stamp else []),
        f"[results file]({_link(source, page)})",
        f"[report]({_link(folder / 'report.md', page)})",
    ]
    return "; ".join(parts) + "."


def _run_table(
    run: RunResults, page: Path, figure: bool, parts: list[RunResults] | None = None
) -> list[str]:
    lines = report.markdown_table(run).rstrip("\n").splitlines()
    if len(run.tasks) > 1 and not any(row.is_group for row in run.main_rows):
        lines.append(_mean_row(run))
    caption = _parts_caption(run, parts, page) if parts and len(parts) > 1 else _caption(run, page)
    out = [caption, "", *lines]
    if figure and not (parts and len(parts) > 1):  # figures are per results file
        assert run.source is not None
        path = run.source.parent / figure_name(run)
        out += ["", f"![Accuracy per task and method; DC-PMI minus the best other method]"
                f"({_link(path, page)})"]  # fmt: skip
    return out


def _part_table(runs: list[RunResults], part: str, page: Path) -> list[str]:
    for run in runs:
        for study in run.studies:
            if study.group == part:
                text = studies.study_markdown(study).splitlines()
                start = next(i for i, line in enumerate(text) if line.startswith("| Task"))
                return [_source_line(run, page), "", *text[start:]]
        rows = [row for row in run.main_rows if row.task == part]
        if rows:
            table = report.markdown_table(run, rows).rstrip("\n").splitlines()
            return [_source_line(run, page), "", *table]
    raise SystemExit(f"make_results: {page}: no study or task {part!r} in its results")


def _source_line(run: RunResults, page: Path) -> str:
    assert run.source is not None
    return f"From [`{run.source.name}`]({_link(run.source, page)})."


def block_body(name: str, options: str, page: Path, root: Path = ROOT) -> str:
    """The generated text of the block ``name`` on ``page`` (relative to ``root``)."""
    set_name, _, part = name.partition("/")
    files = result_sets(root).get(set_name)
    if not files:
        where = (RESULTS / set_name).as_posix()
        return (
            f"*No results yet: put the run's lm-eval results file into `{where}/` and run "
            "`.venv/bin/python scripts/make_results.py`.*\n"
        )
    with _in(root):
        runs = report.load_results([str(f) for f in files])
    if part:
        lines = _part_table(runs, part, page)
    elif "+competition" in options:
        lines = _competition(runs, set_name, page)
    elif "+default_premise" in options:
        lines = _default_premise(runs)
    elif "+calibration" in options or "+priors" in options:
        # one table over every run of the set (a suite scored in parts)
        priors = "+priors" in options
        rows = [
            row
            for run in runs
            for row in (
                comparisons.prior_rows(run) if priors else comparisons.calibration_rows(run)
            )
        ]
        if not rows:
            what = "the priors study's reference contexts" if priors else "CC and BC"
            return f"*No task of this set reports {what}.*\n"
        table = comparisons.priors_table(rows) if priors else comparisons.calibration_table(rows)
        used = [
            run
            for run in runs
            if (comparisons.prior_rows(run) if priors else comparisons.calibration_rows(run))
        ]
        if len(used) > 4:  # one results file per task: the folder, not each file
            folder = used[0].source.parent
            lines = [
                f"From the results files in [{folder.as_posix()}]({_link(folder, page)}).",
                "",
                *table,
            ]
        else:
            sources = ", ".join(f"[`{r.source.name}`]({_link(r.source, page)})" for r in used)
            lines = [f"From {sources}.", "", *table]
    else:
        lines = []
        for run, parts in join_parts(runs):
            if run.main_rows:
                table = _run_table(run, page, "+figure" in options, parts)
                lines += ([""] if lines else []) + table
    return "\n".join(lines) + "\n"


def _default_premise(runs: list[RunResults]) -> list[str]:
    """The last-word premise (the default for a --dcpmi_task without one) against the
    paper's, per task: the multiple-choice tasks, then the classification tasks."""
    rows = [row for run in runs for row in comparisons.prior_rows(run)]
    kinds = paper.paper_tasks()
    lines: list[str] = []
    for kind, title in (("mcqa", "Multiple choice"), ("classification", "Classification")):
        # a priors study task is dcpmi_priors_<task>: the paper task dcpmi_<task>
        chosen = [r for r in rows if kinds.get(r.task.replace("_priors_", "_", 1)) == kind]
        if chosen:
            lines += ([""] if lines else []) + [f"**{title}**", ""]
            lines += comparisons.premise_gap_table(chosen)
    return lines or ["*No task of this set reports the last-word prior.*"]


def _competition(runs: list[RunResults], set_name: str, page: Path) -> list[str]:
    """Surface form competition over the set, per model: the report's per-task table, the
    count of tasks that agree with the thesis, and the figure."""
    groups = competition.competition_groups(runs)
    if not groups:
        return ["*No task of this set logs PMA per document.*"]
    lines: list[str] = []
    for label, found in groups:
        figure = RESULTS / set_name / competition_figure_name(label)
        report_file = RESULTS / set_name / "report.md"
        lines += [
            *([""] if lines else []),
            f"`{label}`: {competition.EXPLANATION} By quartile: the "
            f"[report]({_link(report_file, page)}).",
            "",
            *competition.task_table(found),
            "",
            competition.thesis_line(found),
            "",
            f"![DC-PMI's gain over LM by PMA quartile, a panel per task]({_link(figure, page)})",
        ]
    return lines


def render_page(text: str, page: Path, root: Path = ROOT) -> str:
    """``text`` (the page ``page``, relative to ``root``) with every block regenerated."""

    def replace(match: re.Match[str]) -> str:
        body = block_body(match["name"], match["options"], page, root)
        return match["open"] + body + match["close"]

    return BLOCK.sub(replace, text)


def pages(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for pattern in PAGES:
        found += sorted(p.relative_to(root) for p in root.glob(pattern))
    return found
