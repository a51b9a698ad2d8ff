"""The report's files, written all or nothing, and the report printed: what ``dcpmi report``
(``lm_eval_dcpmi.cli._report``) and ``scripts/make_results.py`` write; ``export`` and
``merge`` write their files with the same all-or-nothing writer.

All or nothing: every target is checked first (a folder where a file goes, a file where the
``--out`` folder goes); each file is then written under a temporary name beside its target
and only moved into place (``os.replace``, atomic on one file system) once all were written.
Each target that exists is first kept under a second name (a hard link, else a copy), so
that when moving a later file into place fails (a target made immutable, a full disk) the
files already replaced are put back and the new ones removed. A failure leaves the targets
as they were and removes the temporary files, and the ``--out`` folder when this call
created it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import printable
from lm_eval_dcpmi.report._competition import Competition, competition_csv, competition_groups
from lm_eval_dcpmi.report._figures import (
    competition_figure_name,
    figure_name,
    plot_competition,
    plot_run,
    plot_study,
    study_figure_name,
)
from lm_eval_dcpmi.report._intervals import intervals_csv
from lm_eval_dcpmi.report._loading import load_results
from lm_eval_dcpmi.report._options import ExportSummary, write_options_csv
from lm_eval_dcpmi.report._results import LABELS, ReportError, RunResults
from lm_eval_dcpmi.report._summary import has_summary, summary_csv, summary_markdown
from lm_eval_dcpmi.report._tables import csv_report, markdown_report

# ---- writing files all or nothing (the report's, and export's and merge's too)


@dataclass(frozen=True)
class Output:
    """A file to write: ``write(path)`` writes its content to ``path`` (a temporary name)."""

    target: Path
    write: Callable[[Path], Any]


def text_output(target: Path, text: str) -> Output:
    """``text`` as UTF-8; a character UTF-8 cannot hold (a file name's undecodable byte,
    which Python keeps as a lone surrogate) is written as its escape, ``\\udce9``."""
    return Output(
        target, lambda path: path.write_text(text, encoding="utf-8", errors="backslashreplace")
    )


def _check(outputs: Sequence[Output], folder: Path | None) -> None:
    if folder is not None and folder.exists() and not folder.is_dir():
        raise ReportError(f"--out {folder} is a file; give a folder (nothing was written)")
    for output in outputs:
        if output.target.is_dir():
            raise ReportError(
                f"{output.target} is a folder; remove or rename it, or write elsewhere "
                "(nothing was written)"
            )


def _missing_ancestor(folder: Path) -> Path | None:
    """The outermost folder of ``folder``'s path that does not exist yet (None: all do)."""
    missing = None
    for candidate in [folder, *folder.parents]:
        if candidate.exists():
            break
        missing = candidate
    return missing


def _remove_created(folder: Path, created: Path) -> None:
    """Remove the empty folders from ``folder`` up to ``created``, which this call made."""
    current = folder
    while True:
        try:
            current.rmdir()
        except OSError:
            return
        if current == created:
            return
        current = current.parent


def write_all(outputs: Sequence[Output], folder: Path | None = None) -> list[Path]:
    """Write ``outputs`` all or nothing (see the module's docstring), creating ``folder``
    first if given; returns the targets."""
    _check(outputs, folder)
    created = _missing_ancestor(folder) if folder is not None else None
    temporary: list[tuple[Path, Path]] = []
    try:
        if folder is not None:
            _make_folder(folder)
        for output in outputs:
            _make_folder(output.target.parent)
            path = output.target.with_name(f".{output.target.name}.{os.getpid()}.tmp")
            temporary.append((path, output.target))
            try:
                output.write(path)
            except OSError as err:
                raise ReportError(
                    f"{output.target}: cannot be written ({err.strerror or err}); nothing was "
                    "written"
                ) from None
        _move_into_place(temporary)
    except BaseException:
        for path, _target in temporary:
            path.unlink(missing_ok=True)
        if folder is not None and created is not None:
            _remove_created(folder, created)
        raise
    return [output.target for output in outputs]


def _make_folder(folder: Path) -> None:
    """``folder`` and its parents made; a folder that cannot be made (a read-only file
    system, no permission, a file in the way) is one ``ReportError`` naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ReportError(
            f"{err.filename or folder}: cannot be created ({err.strerror or err}); give a "
            "folder that can be written (nothing was written)"
        ) from None


def _keep(target: Path) -> Path | None:
    """A second name for ``target``'s current content (None: there is no target)."""
    if not target.exists():
        return None
    kept = target.with_name(f".{target.name}.{os.getpid()}.old")
    kept.unlink(missing_ok=True)
    try:
        os.link(target, kept)
    except OSError:  # no hard links here: a copy
        shutil.copy2(target, kept)
    return kept


def _move_into_place(temporary: Sequence[tuple[Path, Path]]) -> None:
    """``os.replace`` each temporary file onto its target; if one fails, undo the ones
    done (the previous files back, the new ones removed) and raise ``ReportError``."""
    done: list[tuple[Path, Path | None]] = []  # (target, its previous content's second name)
    kept_all: list[Path] = []
    unrestored: list[tuple[Path, Path | None]] = []
    try:
        for path, target in temporary:
            try:
                kept = _keep(target)
                if kept is not None:
                    kept_all.append(kept)
                done.append((target, kept))  # before the move: undone even if it is cut off
                os.replace(path, target)
            except OSError as err:
                unrestored = _undo(done)
                raise ReportError(
                    f"{target}: cannot be moved into place ({err.strerror or err}); "
                    + _undone(unrestored)
                ) from None
    except ReportError:
        raise
    except BaseException:  # Ctrl-C or SIGTERM while moving: every file back as it was
        unrestored = _undo(done)
        raise
    finally:
        keep = {k for _t, k in unrestored}
        for kept in kept_all:
            if kept not in keep:
                kept.unlink(missing_ok=True)


def _undone(unrestored: Sequence[tuple[Path, Path | None]]) -> str:
    if not unrestored:
        return "nothing was written (the files already replaced were restored)"
    return "; ".join(
        f"{target} holds the new version and could not be restored"
        + (f" (the previous one is {kept})" if kept is not None else "")
        for target, kept in unrestored
    )


def _undo(done: Sequence[tuple[Path, Path | None]]) -> list[tuple[Path, Path | None]]:
    """Put back what ``_move_into_place`` replaced; returns those it could not."""
    failed = []
    for target, kept in reversed(done):
        try:
            if kept is None:
                target.unlink(missing_ok=True)
            else:
                os.replace(kept, target)
        except OSError:
            failed.append((target, kept))
    return failed


# ---- the report's files

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
    """The files of the chosen formats in ``out``, to be written by ``write_all``."""
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
