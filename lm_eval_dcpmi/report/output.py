"""The report's files, all or nothing, and the report printed: what ``dcpmi report``
(``lm_eval_dcpmi.cli.report``) and ``scripts/make_results.py`` write."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import printable
from lm_eval_dcpmi.report.competition import Competition, competition_csv, competition_groups
from lm_eval_dcpmi.report.figures import (
    competition_figure_name,
    figure_name,
    plot_competition,
    plot_run,
    plot_study,
    study_figure_name,
)
from lm_eval_dcpmi.report.intervals import intervals_csv
from lm_eval_dcpmi.report.loading import load_results
from lm_eval_dcpmi.report.options import ExportSummary, write_options_csv
from lm_eval_dcpmi.report.results import LABELS, ReportError, RunResults
from lm_eval_dcpmi.report.summary import has_summary, summary_csv, summary_markdown
from lm_eval_dcpmi.report.tables import csv_report, markdown_report
from lm_eval_dcpmi.report.writing import Output, text_output, write_all

FORMATS = ("md", "csv", "png")


def _matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figures(
    runs: Sequence[RunResults], groups: Sequence[tuple[str, Sequence[Competition]]], out: Path
) -> list[Output]:
    outputs = []
    for run in runs:
        if run.main_rows:
            outputs.append(
                Output(out / figure_name(run), lambda path, run=run: plot_run(run, path))
            )
        outputs += [
            Output(out / study_figure_name(run, s), lambda path, r=run, s=s: plot_study(r, s, path))
            for s in run.studies
        ]
    for label, found in groups:
        outputs.append(
            Output(
                out / competition_figure_name(label),
                lambda path, label=label, found=found: plot_competition(label, found, path),
            )
        )
    return outputs


def output_files(
    runs: Sequence[RunResults], text: str, out: Path, chosen: Sequence[str], figures: bool
) -> list[Output]:
    """The files of the chosen formats in ``out``, to be written by ``writing.write_all``."""
    several = has_summary(runs)  # at least two models with main-table tasks
    with_samples = any(run.has_samples for run in runs)
    groups = competition_groups(runs)  # each model's tasks by PMA, for its CSV and figure
    outputs: list[Output] = []
    if "md" in chosen:
        outputs.append(text_output(out / "report.md", text))
        if several:
            outputs.append(text_output(out / "summary.md", summary_markdown(runs)))
    if "csv" in chosen:
        outputs.append(text_output(out / "report.csv", csv_report(runs)))
        if several:
            outputs.append(text_output(out / "summary.csv", summary_csv(runs)))
        if with_samples:
            outputs.append(text_output(out / "intervals.csv", intervals_csv(runs)))
        if groups:
            outputs.append(text_output(out / "competition.csv", competition_csv(groups)))
    if "png" in chosen and figures:
        outputs += _figures(runs, groups, out)
    return outputs


def write_outputs(
    runs: Sequence[RunResults], text: str, out: Path, chosen: Sequence[str], figures: bool
) -> list[Path]:
    """Write the chosen formats into ``out``, all or nothing; returns the files written."""
    return write_all(output_files(runs, text, out, chosen, figures), out)


def _export_messages(summary: ExportSummary, path: Path) -> list[str]:
    messages = [f"wrote {path} ({summary.rows} options of {len(summary.tasks)} task(s))"]
    for task, why in summary.no_tokens.items():
        messages.append(f"{task}: the tokens column is empty: {why}")
    for (task, method), count in summary.mismatches.items():
        messages.append(
            f"warning: {task}: the exported {LABELS[method]} pick disagrees with the logged "
            f"{method} on {count} document(s)"
        )
    return messages


def report_command(
    paths: Sequence[str | PathLike],
    out_dir: str | PathLike | None = None,
    formats: Iterable[str] | None = None,
    *,
    options_csv: str | PathLike | None = None,
    stdout: Any = None,
    stderr: Any = None,
) -> int:
    """Write the report's files (with ``out_dir``), then print its Markdown.

    Writes into ``out_dir`` (created if needed), by format: ``md`` -> ``report.md`` (and
    ``summary.md`` with several models), ``csv`` -> ``report.csv`` (``summary.csv``; with
    samples ``intervals.csv``), ``png`` -> ``figure_<model>.png`` per run and
    ``figure_<model>_<study>.png`` per study. ``formats=None`` means all three, PNG
    skipped with a note when matplotlib is missing; naming ``png`` explicitly makes a
    missing matplotlib an error. ``options_csv``: also write the per-option export there.
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
        messages: list[str] = _unmeasured_warnings(runs)
        outputs: list[Output] = []
        if out_dir is not None:
            figures = explicit or _matplotlib_available()
            if "png" in chosen and not figures:
                messages.append("no figures (pip install 'lm-eval-dcpmi[report]')")
            outputs += output_files(runs, text, Path(out_dir), chosen, figures)
        exported: list[ExportSummary] = []
        if options_csv is not None:
            outputs.append(
                Output(
                    Path(options_csv), lambda path: exported.append(write_options_csv(runs, path))
                )
            )
        # Every file or none: a failing one (e.g. report.csv is a folder) leaves no other.
        written = write_all(outputs, Path(out_dir) if out_dir is not None else None)
        # Printed once the files are written: a refused --out prints no report.
        stdout.write(_printable(text))
        options_path = Path(options_csv) if options_csv is not None else None
        messages += [f"wrote {path}" for path in written if path != options_path]
        if exported and options_path is not None:
            messages += _export_messages(exported[0], options_path)
        for message in messages:
            stderr.write(_printable(f"dcpmi report: {message}\n"))
    except ReportError as error:
        stderr.write(f"dcpmi report: error: {printable(str(error))}\n")
        return 2
    except OSError as error:  # an --out folder that cannot be written
        where = f"{error.filename}: " if error.filename else ""
        stderr.write(f"dcpmi report: error: {printable(where + str(error.strerror or error))}\n")
        return 2
    return 0


def _unmeasured_warnings(runs: Sequence[RunResults]) -> list[str]:
    """A warning per task whose samples log a NaN PMA: never left out without a word."""
    found = []
    for run in runs:
        for row in run.rows:
            if row.unmeasured:
                ids = ", ".join(map(str, row.unmeasured[:5]))
                more = " ..." if len(row.unmeasured) > 5 else ""
                where = run.samples_files.get(row.task) or run.model
                found.append(
                    f"warning: {where} ({row.task}): the PMA of {len(row.unmeasured)} "
                    f"document(s) is NaN (doc {ids}{more}); the surface form competition "
                    "section leaves them out"
                )
    return found


def _printable(text: str) -> str:
    """``text`` with what no terminal encoding can hold (a file name's undecodable byte, a
    lone surrogate in Python) as its escape, ``\\udce9``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
