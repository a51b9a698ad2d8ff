"""Reading results files and ``--output_path`` folders into ``RunResults``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from os import PathLike
from pathlib import Path

from lm_eval_dcpmi.report.results import (
    ReportError,
    RunResults,
    TaskRow,
    per_document,
    run_from_dict,
)
from lm_eval_dcpmi.report.samples import read_samples, samples_files

log = logging.getLogger(__name__)


class SamplesError(ReportError):
    """The samples files beside a DC-PMI results file are unreadable or do not match it."""


def read_results_file(path: Path) -> RunResults:
    """One results file, with the per-document values of the samples files beside it."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not an lm-eval results file (not UTF-8 text)") from None
    except OSError as error:
        raise ReportError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(
            f"{path}:{error.lineno}: not an lm-eval results file (not JSON: {error.msg} at "
            f"column {error.colno})"
        ) from None
    run = run_from_dict(data, path, samples={})
    run.samples_files = samples_files(path, [row.task for row in run.rows if not row.is_group])
    for row in run.rows:
        if row.task in run.samples_files:
            samples_file = run.samples_files[row.task]
            try:
                row.per_doc = per_document(read_samples(samples_file)) or None
            except ReportError as error:
                raise SamplesError(str(error)) from None
            _same_documents(row, samples_file, path)
    return run


def _same_documents(row: TaskRow, samples_file: Path, results_file: Path) -> None:
    """The samples file holds as many documents as the results file counted: else its
    intervals and tests would be about other documents than the table's accuracies."""
    if not row.per_doc or row.n is None:
        return
    documents = len(next(iter(row.per_doc.values())))
    if documents != row.n:
        raise SamplesError(
            f"{samples_file}: {documents} documents of {row.task}, but {results_file} "
            f"reports n={row.n}; the files are not from one complete run (an interrupted "
            "or edited samples file?). Rerun with --log_samples, or move the samples file "
            "away to report without intervals."
        )


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
                runs.append(read_results_file(path))
                break
            except SamplesError:
                raise  # a DC-PMI run with broken samples: never fall back to an older run
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
      ``ReportError`` only when none is left, or when the samples files beside a DC-PMI
      results file are broken or hold another number of documents (``SamplesError``).
      To report several runs of the same model, pass their files explicitly.

    The ``samples_<task>_<date>.jsonl`` files beside a results file (``--log_samples``)
    are read too, for intervals and significance. Runs keep the order of ``paths``
    (folders: subfolders alphabetically). The same file given twice is read once. Runs
    of the same model get the date of their file appended to their name.
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
            found = [read_results_file(path)]
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
