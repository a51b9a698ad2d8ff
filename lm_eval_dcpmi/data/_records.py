"""Record checks: validate a raw row, add its ``gold`` index.

A record reader takes one raw row from a loader (``_loaders``) and returns the row with
``gold`` (and, where the spec asks for data processing rather than wording, a few derived
fields), or None for a row the task leaves out by definition (SST-2's neutral sentences).
Wording stays in the task YAMLs. A bad row raises ``RecordError``; the loader adds the
file and line. Each dataset's readers live in its folder (``task_configs/<dataset>/
dataset.py``, see ``_folders``); here are the helpers they use and the reader several
datasets share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lm_eval_dcpmi.data import _folders as folders

Row = dict[str, Any]


class RecordError(ValueError):
    """A record the task cannot score; the message says what is wrong."""


def field(row: Row, name: str) -> Any:
    """The row's ``name``, which must be there and not null."""
    if name not in row or row[name] is None:
        present = ", ".join(sorted(k for k in row if k != "source"))
        raise RecordError(f"missing field '{name}' (fields present: {present})")
    return row[name]


def nonempty(row: Row, name: str) -> str:
    """The row's text field ``name``, which must hold more than whitespace."""
    value = field(row, name)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"field '{name}' is empty; every premise and option needs text")
    return value


def index_in(value: Any, allowed: Sequence[Any], name: str) -> int:
    """``value``'s position in ``allowed`` (a label's gold index)."""
    if value not in allowed:
        raise RecordError(f"{name} {value!r} is not one of {list(allowed)}")
    return list(allowed).index(value)


def option_texts(values: Any, name: str) -> list[str]:
    """``values``, which must be a list of two or more non-empty texts."""
    if not isinstance(values, list) or len(values) < 2:
        raise RecordError(f"'{name}' must list at least two options, got {values!r}")
    for number, value in enumerate(values, start=1):
        if not isinstance(value, str) or not value.strip():
            raise RecordError(f"option {number} of '{name}' is empty")
    return values


def question_choices(row: Row) -> Row:
    """ARC, OpenBookQA, CommonsenseQA: ``question.stem``, ``question.choices``, ``answerKey``."""
    question = field(row, "question")
    if not isinstance(question, dict):
        raise RecordError("field 'question' must be an object with 'stem' and 'choices'")
    nonempty(question, "stem")
    choices = field(question, "choices")
    option_texts(
        [c.get("text") if isinstance(c, dict) else None for c in choices], "question.choices"
    )
    labels = [c.get("label") for c in choices]
    gold = index_in(field(row, "answerKey"), labels, "answerKey")
    # Arrow needs one schema per column: keep only the fields the wording uses.
    return {
        "id": row.get("id", ""),
        "stem": question["stem"],
        "choices": [c["text"] for c in choices],
        "labels": labels,
        "answerKey": row["answerKey"],
        "gold": gold,
        "source": row["source"],
    }


# Readers several dataset folders name (ARC, OpenBookQA and CommonsenseQA share a format).
SHARED: dict[str, Callable[[Row], Row | None]] = {"question_choices": question_choices}


def get(name: str) -> Callable[[Row], Row | None]:
    """The record reader ``name``: a shared one, or the one a dataset folder declares."""
    if name in SHARED:
        return SHARED[name]
    readers = folders.record_readers()
    if name in readers:
        return readers[name][0]
    known = sorted([*SHARED, *readers])
    raise ValueError(
        f"unknown record type {name!r} in dataset_kwargs; known: {', '.join(known)} (a dataset "
        "folder declares its readers in RECORDS of its dataset.py)"
    )
