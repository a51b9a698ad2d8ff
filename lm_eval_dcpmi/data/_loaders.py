"""Finding the evaluation files and reading them: one loader per file format.

Every loader returns a ``datasets.DatasetDict`` with one ``test`` split whose rows
keep the file's order. Each row carries ``source`` ("file:line" or "file item N"),
so that any later error, and every logged sample, can name the record it came from.
A per-dataset *record* function (declared in the dataset's folder, ``_folders``) validates
the raw row and adds ``gold``; the wording of premises and options lives in the task YAMLs.

Where the files come from, in order: the ``data_dir`` task metadata
(``--metadata '{"data_dir": ...}'``), the ``DCPMI_DATA_DIR`` environment variable,
else the upstream file or archive its dataset folder names, downloaded once through
``datasets``' download manager (cached under the Hugging Face datasets cache; from the
server ``DCPMI_DATA_MIRROR`` names instead, if set) and checked against the sha256 the
folder records (``_upstream``). COPA's two files (``PACKAGED``, BSD-2-Clause: their
licence lies beside them in ``data/copa/``) ship inside the package: with a data folder
set, they are read from it like every file; with none, from the package, never
downloaded. The log says where a file not read from a data folder came from (the package,
or the address it was downloaded from). ``dcpmi fetch`` (``_fetch``) downloads them all
into a data folder.
(``_user_json`` names the file and line of a user task's JSON data the datasets library
cannot read.)
"""

from __future__ import annotations

import csv
import functools
import logging
import os
import random
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import datasets

from lm_eval_dcpmi._json_files import parse_json
from lm_eval_dcpmi.data import _folders as folders
from lm_eval_dcpmi.data import _records as records
from lm_eval_dcpmi.data._text_files import declares_utf8, is_utf8, not_utf8_message, reading
from lm_eval_dcpmi.data._upstream import MIRROR_ENV, Mirror, checked_sha256, mirror_from_env
from lm_eval_dcpmi.errors import DataError

log = logging.getLogger(__name__)

DATA_DIR_ENV = "DCPMI_DATA_DIR"

# The data files the package carries (their licences allow it), as paths in a data folder;
# they lie under this folder at the same paths, with their licence and notice beside them.
PACKAGED_DIR = Path(__file__).resolve().parent
PACKAGED = frozenset({"copa/copa-dev.xml", "copa/copa-test.xml"})


def packaged(file: str) -> Path | None:
    """The package's own copy of ``file`` (a path in the data folder), if it carries one."""
    return PACKAGED_DIR / file if file in PACKAGED else None


@functools.cache
def _say_once(message: str) -> None:
    log.info(message)


def locate(
    file: str, data_dir: str | os.PathLike | None = None, *, folder: bool | None = False
) -> Path:
    """Path of ``file`` (relative to the data folder), downloading it if needed; a file,
    or with ``folder`` a folder (else ``DataError``); ``folder=None`` takes either."""
    path = _find(file, data_dir)
    if folder is None:
        return path
    if folder and not path.is_dir():
        raise DataError(
            f"{path} is a file, but {file} must be a folder (of RACE's *.txt article files, "
            "one JSON article each); point the data folder at the unpacked dataset."
        )
    if not folder and path.is_dir():
        raise DataError(
            f"{path} is a folder, but {file} must be a file; put the file itself there "
            "(docs/tasks.md lists each task's file)."
        )
    return path


def _find(file: str, data_dir: str | os.PathLike | None) -> Path:
    root = data_dir or os.environ.get(DATA_DIR_ENV)
    if root:
        root = Path(root)
        if not root.is_dir():
            raise DataError(
                f"data folder {root} does not exist (from "
                f"{'the data_dir metadata' if data_dir else DATA_DIR_ENV}). Point it at a folder "
                f"laid out as <dataset>/<file>, e.g. {DATA_DIR_ENV}=../shared/data, or unset it "
                "to download the upstream files."
            )
        path = root / file
        if not path.exists():
            otherwise = (
                "read the copy shipped with the plugin"
                if packaged(file) is not None
                else "download it"
            )
            raise DataError(
                f"{path} not found: the data folder {root} has no {file}. Copy the upstream "
                f"file there (docs/tasks.md lists each task's file) or unset {DATA_DIR_ENV} "
                f"to {otherwise}."
            )
        return path
    shipped = packaged(file)
    if shipped is not None:
        _say_once(
            f"{file}: no data folder is set ({DATA_DIR_ENV}); read from the copy shipped "
            f"with lm_eval_dcpmi ({shipped}), no download"
        )
        return shipped
    return _download(file, mirror_from_env())


def _download(file: str, mirror: Mirror | None = None, *, fetching: bool = False) -> Path:
    """``file`` downloaded (once: the datasets cache keeps it) from its upstream address, or
    the same path on ``mirror``, and checked against its recorded sha256 (``fetching``: for
    ``dcpmi fetch``, whose failure has another fix than a task's)."""
    source = folders.upstream(file)
    if source is None:
        raise DataError(
            f"{file}: no local data folder is set and no upstream address is known for it "
            f"(FILES in its dataset folder's dataset.py). Set {DATA_DIR_ENV} to a folder "
            f"that holds {file}."
        )
    url = source.url if mirror is None else mirror.address(source.url)
    member = source.member
    try:
        manager = datasets.DownloadManager(dataset_name="lm_eval_dcpmi")
        # download_and_extract in two steps: a bad download's message names both copies
        downloaded = Path(manager.download(url))
        fetched = Path(manager.extract(str(downloaded)))
    except Exception as err:  # network errors come in many types; all end here
        failed = f"{url} and failed ({type(err).__name__}: {err})"
        server = f" to {MIRROR_ENV}'s server" if mirror is not None else ""
        raise DataError(
            f"{file}: dcpmi fetch tried to download {failed}. Check the network access"
            f"{server} and run dcpmi fetch again (the files it has fetched stay)."
            if fetching
            else f"{file}: {DATA_DIR_ENV} is not set, so the plugin tried to download {failed}. "
            f"Set {DATA_DIR_ENV} to a folder that holds {file}, or allow network access{server}."
        ) from err
    if member is None:
        path = fetched
    else:
        found = sorted(p for p in fetched.rglob(Path(member).name) if p.as_posix().endswith(member))
        if not found:
            raise DataError(f"{file}: the archive {url} (extracted at {fetched}) has no {member}.")
        path = found[0]
    checked_sha256(file, path, url, downloaded, fetched)
    _say_once(f"{file}: no data folder is set ({DATA_DIR_ENV}); downloaded from {url} ({path})")
    return path


def _dataset(rows: Iterable[dict[str, Any]], record: str | None, file: str) -> datasets.DatasetDict:
    prepare: Callable[[dict], dict] = records.get(record) if record else (lambda row: row)
    prepared = []
    excluded = 0
    for row in rows:
        try:
            out = prepare(row)
        except records.RecordError as err:
            raise DataError(f"{row['source']}: {err}") from None
        if out is None:  # excluded by the task's definition (SST-2's neutral label)
            excluded += 1
        else:
            prepared.append(out)
    if excluded:
        log.info("%s: %d records excluded by the '%s' task definition", file, excluded, record)
    if not prepared:
        raise DataError(f"{file}: no records found; is it the right file?")
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(prepared)})


# --------------------------------------------------------------------------- loaders
# Signature: (file, record=None, data_dir=None, **task_metadata) -> DatasetDict.
# lm-eval passes the task's metadata (model args and the like) as keyword
# arguments to a custom_dataset; the loaders ignore what they do not use.


def xml_items(file: str, record: str | None = None, data_dir: str | None = None, **_: Any):
    """XML with one ``<item>`` per record (COPA): attributes plus child-element texts."""
    path = locate(file, data_dir)
    try:
        with reading(path, file):
            root = ET.parse(path).getroot()
    except ET.ParseError as err:
        if declares_utf8(path) and not is_utf8(path):
            raise DataError(not_utf8_message(path, file)) from None
        line, column = err.position
        what = str(err).rsplit(": line ", 1)[0]  # expat's message ends with the position
        raise DataError(
            f"{file}:{line}: not well-formed XML at column {column} ({what}); fix the file "
            "or fetch it again."
        ) from None
    rows = []
    for number, item in enumerate(root.iter("item"), start=1):
        row = {k.replace("-", "_"): v for k, v in item.attrib.items()}
        for child in item:
            row[child.tag] = child.text or ""
        row["source"] = f"{file} item {number} (id={item.get('id', '?')})"
        rows.append(row)
    return _dataset(rows, record, file)


def tsv(file: str, record: str | None = None, data_dir: str | None = None, **_: Any):
    """Tab-separated values with a header row (StoryCloze)."""
    return _delimited(file, "\t", record, data_dir)


def csv_rows(file: str, record: str | None = None, data_dir: str | None = None, **_: Any):
    """Comma-separated values with a header row (AG News)."""
    return _delimited(file, ",", record, data_dir)


def _delimited(file: str, delimiter: str, record: str | None, data_dir: str | None):
    path = locate(file, data_dir)
    # utf-8-sig: a byte-order mark before the header is not part of the first field's name.
    with reading(path, file), open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        rows = []
        for row in reader:
            line = reader.line_num
            if None in row or None in row.values():
                raise DataError(
                    f"{file}:{line}: expected {len(reader.fieldnames or [])} fields "
                    f"({', '.join(reader.fieldnames or [])}); the row has a different number."
                )
            rows.append({**row, "source": f"{file}:{line}"})
    return _dataset(rows, record, file)


def jsonl(file: str, record: str | None = None, data_dir: str | None = None, **_: Any):
    """One JSON object per line (HellaSwag, ARC, OpenBookQA, CommonsenseQA, BoolQ, RTE, CB)."""
    path = locate(file, data_dir)
    rows = []
    with reading(path, file), open(path, encoding="utf-8-sig") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = parse_json(line, file, line=line_number, error=DataError)
            if not isinstance(row, dict):
                raise DataError(f"{file}:{line_number}: expected a JSON object per line.")
            rows.append({**row, "source": f"{file}:{line_number}"})
    return _dataset(rows, record, file)


def labelled_lines(file: str, record: str | None = None, data_dir: str | None = None, **_: Any):
    """One record per line, ``LABEL<sep>text`` (SST ``__label__N\\t...``, TREC ``COARSE:fine ...``).

    The split of label and text is the record function's job: the raw line is ``line``.
    """
    path = locate(file, data_dir)
    rows = []
    with reading(path, file), open(path, encoding="utf-8-sig") as handle:
        for line_number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            rows.append({"line": line, "source": f"{file}:{line_number}"})
    return _dataset(rows, record, file)


def race_folder(file: str, record: str | None = None, data_dir: str | None = None, **_: Any):
    """A RACE folder: one JSON article per ``*.txt`` file, one record per question.

    Files are taken in sorted file-name order, questions in file order.
    """
    folder = locate(file, data_dir, folder=True)
    files = sorted(p for p in folder.glob("*.txt") if p.is_file())
    if not files:
        raise DataError(f"{file}: no *.txt article files in {folder}.")
    rows = []
    for path in files:
        name = f"{file}/{path.name}"
        try:
            with reading(path, name):
                article = parse_json(path.read_text(encoding="utf-8-sig"), name, error=DataError)
            if not isinstance(article, dict):
                raise DataError(f"{name}: expected one JSON object (a RACE article) per file.")
            questions, options, answers = (
                article["questions"],
                article["options"],
                article["answers"],
            )
            text = article["article"]
        except KeyError as err:
            raise DataError(
                f"{name}: missing field {err}; a RACE file needs article, "
                "questions, options and answers."
            ) from None
        if not len(questions) == len(options) == len(answers):
            raise DataError(
                f"{name}: {len(questions)} questions, {len(options)} option lists and "
                f"{len(answers)} answers; they must match one to one."
            )
        for number, (question, opts, answer) in enumerate(
            zip(questions, options, answers, strict=True), 1
        ):
            rows.append(
                {
                    "article": text,
                    "question": question,
                    "options": opts,
                    "answer": answer,
                    "id": article.get("id", path.name),
                    "source": f"{name} question {number}",
                }
            )
    return _dataset(rows, record, file)


# ------------------------------------------------------------------ few-shot examples


def draw_examples(pool_size: int, n: int, seed: int) -> list[int]:
    """Indices of ``n`` distinct pool records drawn at random with ``seed``, in draw order.

    The same (pool_size, n, seed) always gives the same indices (Python's ``random.Random``
    is stable across platforms and versions for ``sample``).
    """
    if n > pool_size:
        raise ValueError(f"asks for {n} examples but the pool holds {pool_size}")
    return random.Random(seed).sample(range(pool_size), n)


def _positive_int(value: Any, name: str, minimum: int) -> int:
    # bool is an int in Python; `fewshot_n: true` in a YAML is a mistake, not 1.
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise DataError(
            f"dataset_kwargs.{name} must be an integer >= {minimum}, got {value!r}; "
            "set it in the task YAML."
        )
    return value


def labelled_lines_with_examples(
    file: str,
    record: str | None = None,
    data_dir: str | None = None,
    *,
    fewshot_file: str | None = None,
    fewshot_n: Any = None,
    fewshot_seed: Any = None,
    fewshot_text_field: str = "sentence",
    **_: Any,
) -> datasets.DatasetDict:
    """``labelled_lines`` of ``file`` as ``test``, plus a ``train`` split holding ONE set of
    few-shot examples: ``fewshot_n`` records of ``fewshot_file`` drawn with ``fewshot_seed``.

    A task reads the set with ``fewshot_split: train`` and lm-eval's ``first_n`` sampler, so
    every test document gets the same examples in the same order: the paper's setting (one
    set per seed), not lm-eval's default of a new draw per document. The pool is
    ``fewshot_file`` read with the same ``record`` check (SST-2 drops neutral sentences), minus
    every record whose ``fewshot_text_field`` also occurs in ``file``, so that no example can
    be a test item (SST's train and test files share two sentences).
    """
    if not fewshot_file:
        raise DataError(
            f"{file}: few-shot examples need dataset_kwargs.fewshot_file (the example pool, "
            "e.g. sst/sst_train.txt) in the task YAML."
        )
    n = _positive_int(fewshot_n, "fewshot_n", 1)
    seed = _positive_int(fewshot_seed, "fewshot_seed", 0)
    test = labelled_lines(file, record, data_dir)["test"]
    pool = labelled_lines(fewshot_file, record, data_dir)["test"]
    for split, name in ((test, file), (pool, fewshot_file)):
        if fewshot_text_field not in split.column_names:
            raise DataError(
                f"{name}: records have no field {fewshot_text_field!r} "
                f"(fields: {', '.join(split.column_names)}); set dataset_kwargs."
                "fewshot_text_field to the field that holds the text."
            )
    test_texts = set(test[fewshot_text_field])
    usable = [i for i, text in enumerate(pool[fewshot_text_field]) if text not in test_texts]
    if len(usable) < len(pool):
        log.info(
            "%s: %d pool records left out because their text is also in %s",
            fewshot_file,
            len(pool) - len(usable),
            file,
        )
    try:
        drawn = draw_examples(len(usable), n, seed)
    except ValueError:
        raise DataError(
            f"{fewshot_file}: dataset_kwargs.fewshot_n asks for {n} examples, but the pool "
            f"holds only {len(usable)} usable records ({len(pool) - len(usable)} more are also "
            f"in {file}); lower fewshot_n or use a larger file."
        ) from None
    examples = pool.select([usable[i] for i in drawn])
    return datasets.DatasetDict({"test": test, "train": examples})


# ------------------------------------------------------------- a user's JSON data files
