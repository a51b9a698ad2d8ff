"""Reading results files and ``--output_path`` folders into ``RunResults``."""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._json_files import RESULTS_FILE_FIX, parse_json, read_text
from lm_eval_dcpmi.report._integrity import SamplesError, check_numbers, same_metrics
from lm_eval_dcpmi.report._results import (
    METHODS,
    ReportError,
    RunResults,
    TaskRow,
    number,
    per_document,
    run_from_dict,
    unmeasured,
)
from lm_eval_dcpmi.report._samples import (
    digest_mismatch,
    domain_contexts,
    read_samples,
    samples_files,
    task_hash,
    task_layout,
)
from lm_eval_dcpmi.rules import TRUNCATED
from lm_eval_dcpmi.task import premise_digest_in, short_digest, text_sha256

log = logging.getLogger(__name__)


def read_results_file(path: Path) -> RunResults:
    """One results file, with the per-document values of the samples files beside it."""
    try:
        text = read_text(path, ReportError)  # a regular file only: a FIFO would block
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not an lm-eval results file (not UTF-8 text)") from None
    data = parse_json(text, str(path), error=ReportError, fix=RESULTS_FILE_FIX)
    run = run_from_dict(data, path, samples={})
    counts = data.get("n-samples", {})
    for row in run.rows:
        by_task = counts if isinstance(counts, Mapping) else {row.task: counts}
        if row.is_group:
            by_task = {}  # lm-eval counts a group's documents in its tasks' entries
        elif row.task not in by_task and by_task:
            by_task = {row.task: None}  # other tasks counted, this one not
        configs = data.get("configs")
        config = configs.get(row.task) if isinstance(configs, Mapping) else None
        check_numbers(row.task, data["results"][row.task], by_task, str(path), config)
    run.samples_files = samples_files(path, [row.task for row in run.rows if not row.is_group])
    for row in run.rows:
        if row.task in run.samples_files:
            samples_file = run.samples_files[row.task]
            try:
                samples = read_samples(samples_file)
            except ReportError as error:
                raise SamplesError(str(error)) from None
            same_metrics(samples, samples_file)
            # doc ids that are indices first: the per-document values are put in their order
            _index_doc_ids(samples, f"{samples_file} ({row.task}, beside {path})")
            row.per_doc = per_document(samples) or None
            row.unmeasured = unmeasured(samples)
            _same_documents(row, samples_file, path)
            _same_run(row, samples, samples_file, path, data)
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


MOVE_AWAY = (
    "Use the samples files written with this results file (the same date in their names), "
    "or move the samples file away to report without intervals."
)


def _same_run(
    row: TaskRow,
    samples: Sequence[Mapping[str, Any]],
    samples_file: Path,
    results_file: Path,
    data: Mapping[str, Any],
) -> None:
    """The samples file is this results file's: its doc ids are unique and the documents
    the run scored; its per-document values average to the results' accuracies, exactly;
    and, where it carries them, lm-eval's sample hashes give the results' ``task_hashes``
    and its domain requests hold the domain premise the results record for the task. Else
    the intervals and tests would contradict the table beside them."""
    where = f"{samples_file} ({row.task}, beside {results_file})"
    scored = [s for s in samples if s.get("filter", "none") == "none"]
    _doc_ids(row, scored, where, data)
    for method in (*METHODS, *row.extra):
        values = (row.per_doc or {}).get(method)
        if not values or method not in {**row.scores, **row.extra}:
            continue
        mean = sum(values) / len(values)  # lm-eval's `mean` aggregation
        reported = {**row.scores, **row.extra}[method]
        if not (mean == reported or (math.isnan(mean) and math.isnan(reported))):
            right = sum(1 for v in values if v == 1.0)
            raise SamplesError(
                f"{where}: its per-document {method} averages {mean:.6g} ({right} of "
                f"{len(values)} documents right), but the results file reports "
                f"{reported:.6g}; the samples are another run's (or edited). {MOVE_AWAY}"
            )
    for measure, reported in row.measures.items():
        values = (row.per_doc or {}).get(measure)
        if not values:
            continue
        mean = math.fsum(values) / len(values)  # equal to lm-eval's mean up to rounding
        both_nan = math.isnan(mean) and math.isnan(reported)
        if not (both_nan or math.isclose(mean, reported, rel_tol=1e-9)):
            raise SamplesError(
                f"{where}: its per-document {measure} averages {mean:.6g}, but the results "
                f"file reports {reported:.6g}; the samples are another run's (or edited). "
                f"{MOVE_AWAY}"
            )
    logged = [number(s[TRUNCATED]) for s in scored if TRUNCATED in s]
    if row.truncated is not None and logged and len(logged) == len(scored):
        total = math.fsum(logged)  # lm-eval's `total` aggregation: the documents' sum
        if not (total == row.truncated or (math.isnan(total) and math.isnan(row.truncated))):
            raise SamplesError(
                f"{where}: its per-document {TRUNCATED} add up to {total:g}, but the results "
                f"file reports {row.truncated:g}; the samples are another run's (or edited). "
                f"{MOVE_AWAY}"
            )
    hashes = data.get("task_hashes")
    recorded = hashes.get(row.task) if isinstance(hashes, Mapping) else None
    computed = task_hash(samples)
    if isinstance(recorded, str) and computed is not None and computed != recorded:
        raise SamplesError(
            f"{where}: its documents and prompts (lm-eval's doc_hash, prompt_hash and "
            f"target_hash) hash to {computed[:12]}..., but the results file's task_hashes "
            f"give {recorded[:12]}...; the samples are another run's. {MOVE_AWAY}"
        )
    # Line by line too: without the results' task_hashes the hashes are compared with
    # nothing else, and a line's doc or requests may have been changed without them.
    for sample in scored:
        mismatch = digest_mismatch(sample)
        if mismatch is not None:
            what = "document" if mismatch == "doc_hash" else "first request's context"
            raise SamplesError(
                f"{where}: doc {sample.get('doc_id')}'s {mismatch} is not the digest of the "
                f"{what} the line logs; the line is another run's (or edited). {MOVE_AWAY}"
            )
    _same_premise(row, scored, where, data)


def _index_doc_ids(samples: Sequence[Mapping[str, Any]], where: str) -> None:
    """Every doc id is a document index (a whole number, or its digits as text)."""
    for sample in samples:
        value = sample.get("doc_id")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, str))
            or not str(value).isdecimal()
        ):
            raise SamplesError(f"{where}: doc_id {value!r} is not a document index")


def _doc_ids(
    row: TaskRow, scored: Sequence[Mapping[str, Any]], where: str, data: Mapping[str, Any]
) -> None:
    """Unique doc ids, within the task's documents; the first ``n`` when the run scored
    them all or took the first ones (``--limit``), any ``n`` of them after ``--samples``.
    Each is a document index already (``_index_doc_ids``, on every sample)."""
    ids = [int(sample["doc_id"]) for sample in scored]
    repeated = sorted(i for i, count in Counter(ids).items() if count > 1)
    if repeated:
        raise SamplesError(
            f"{where}: doc_id {repeated[0]} appears {Counter(ids)[repeated[0]]} times"
            f"{f' ({len(repeated)} doc ids repeat)' if len(repeated) > 1 else ''}; a samples "
            f"file holds each document once. {MOVE_AWAY}"
        )
    config = data.get("config") if isinstance(data, Mapping) else None
    limit = config.get("limit") if isinstance(config, Mapping) else None
    if row.n_total is not None:
        beyond = [i for i in ids if i >= row.n_total]
        if beyond:
            raise SamplesError(
                f"{where}: doc_id {beyond[0]} is beyond the task's {row.n_total} documents "
                f"(0-{row.n_total - 1}). {MOVE_AWAY}"
            )
    prefix = limit is not None or (row.n_total is not None and row.n == row.n_total)
    if prefix and row.n is not None:
        missing = sorted(set(range(row.n)) - set(ids))
        if missing:
            raise SamplesError(
                f"{where}: doc_id {missing[0]} is missing ({len(missing)} of the first "
                f"{row.n} documents the run scored are); the samples are not this run's "
                f"documents. {MOVE_AWAY}"
            )


def _same_premise(
    row: TaskRow, scored: Sequence[Mapping[str, Any]], where: str, data: Mapping[str, Any]
) -> None:
    """Where the samples carry their requests and the results record a domain premise
    that is no template (and that their version's ``+premise.<digest>`` names), every
    domain request holds it."""
    configs = data.get("configs") if isinstance(data, Mapping) else None
    config = configs.get(row.task) if isinstance(configs, Mapping) else None
    metadata = config.get("metadata") if isinstance(config, Mapping) else None
    premise = metadata.get("domain_premise") if isinstance(metadata, Mapping) else None
    if not isinstance(premise, str) or not premise.strip() or "{" in premise:
        return
    versions = data.get("versions")
    version = str(versions.get(row.task, "") if isinstance(versions, Mapping) else "")
    named = premise_digest_in(version)
    if named and named != short_digest(text_sha256(premise)):
        return  # the results file contradicts itself; its version is what it is
    for sample in scored:
        contexts = domain_contexts(sample, task_layout(config))
        if contexts is None:
            return  # trimmed samples: no requests to compare
        if any(premise.strip() not in context for context in contexts):
            raise SamplesError(
                f"{where}: doc {sample.get('doc_id')}'s domain requests do not hold the "
                f"domain premise {premise!r} the results file records for the task "
                f"(version {version or 'unknown'}); the samples are another version's. "
                f"{MOVE_AWAY}"
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
    if not runs:  # the refusal names the first skipped file: one line, no warning before it
        raise ReportError(
            f"{folder}: no DC-PMI results under this folder ({len(skipped)} results file(s) "
            f"skipped; first: {skipped[0]})"
        )
    for reason in skipped:
        log.warning("skipped %s", reason)
    return runs


def _unique_names(runs: list[RunResults]) -> None:
    """Give runs of the same model distinct names (the date of their results file)."""
    counts: dict[str, int] = {}
    for one in runs:
        counts[one.model] = counts.get(one.model, 0) + 1
    taken: set[str] = set()
    for index, one in enumerate(runs, start=1):
        if counts[one.model] > 1:
            stamp = str(index)
            if one.source is not None:
                match = re.search(r"(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)", one.source.name)
                stamp = match.group(1) if match else one.source.stem
            name = f"{one.model} [{stamp}]"
            if name in taken:
                name = f"{one.model} [{stamp} #{index}]"
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
        elif path.exists():  # read_results_file refuses what is not a regular file
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
