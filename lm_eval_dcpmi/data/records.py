"""Per-dataset record checks: validate a raw row, add its ``gold`` index.

Each function takes one raw row from a loader (``loaders``) and returns the row
with ``gold`` (and, where the spec asks for data processing rather than wording,
a few derived fields). Wording stays in the task YAMLs. A bad row raises
``RecordError``; the loader adds the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

Row = dict[str, Any]


class RecordError(ValueError):
    """A record the task cannot score; the message says what is wrong."""


def _field(row: Row, name: str) -> Any:
    if name not in row or row[name] is None:
        present = ", ".join(sorted(k for k in row if k != "source"))
        raise RecordError(f"missing field '{name}' (fields present: {present})")
    return row[name]


def _text(row: Row, name: str) -> str:
    value = _field(row, name)
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"field '{name}' is empty; every premise and option needs text")
    return value


def _index(value: Any, allowed: Sequence[Any], name: str) -> int:
    if value not in allowed:
        raise RecordError(f"{name} {value!r} is not one of {list(allowed)}")
    return list(allowed).index(value)


def _options(values: Any, name: str) -> list[str]:
    if not isinstance(values, list) or len(values) < 2:
        raise RecordError(f"'{name}' must list at least two options, got {values!r}")
    for number, value in enumerate(values, start=1):
        if not isinstance(value, str) or not value.strip():
            raise RecordError(f"option {number} of '{name}' is empty")
    return values


def copa(row: Row) -> Row:
    for name in ("p", "a1", "a2"):
        _text(row, name)
    _index(_field(row, "asks_for"), ["cause", "effect"], "asks-for")
    gold = _index(
        _field(row, "most_plausible_alternative"), ["1", "2"], "most-plausible-alternative"
    )
    return {**row, "gold": gold}


def storycloze(row: Row) -> Row:
    for name in (
        "InputSentence1",
        "InputSentence2",
        "InputSentence3",
        "InputSentence4",
        "RandomFifthSentenceQuiz1",
        "RandomFifthSentenceQuiz2",
    ):
        _text(row, name)
    gold = _index(_field(row, "AnswerRightEnding"), ["1", "2"], "AnswerRightEnding")
    return {**row, "gold": gold}


def hellaswag(row: Row) -> Row:
    _text(row, "ctx")
    endings = _options(_field(row, "endings"), "endings")
    label = _field(row, "label")
    if isinstance(label, str) and label.strip().isdigit():  # "3" as well as 3
        label = int(label)
    gold = _index(label, range(len(endings)), "label")
    return {**row, "gold": gold}


def question_choices(row: Row) -> Row:
    """ARC, OpenBookQA, CommonsenseQA: ``question.stem``, ``question.choices``, ``answerKey``."""
    question = _field(row, "question")
    if not isinstance(question, dict):
        raise RecordError("field 'question' must be an object with 'stem' and 'choices'")
    _text(question, "stem")
    choices = _field(question, "choices")
    _options([c.get("text") if isinstance(c, dict) else None for c in choices], "question.choices")
    labels = [c.get("label") for c in choices]
    gold = _index(_field(row, "answerKey"), labels, "answerKey")
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


def boolq(row: Row) -> Row:
    for name in ("question", "title"):
        _text(row, name)
    gold = _index(_field(row, "answer"), [True, False], "answer")
    return {**row, "gold": gold}


def rte(row: Row) -> Row:
    for name in ("premise", "hypothesis"):
        _text(row, name)
    gold = _index(_field(row, "label"), ["entailment", "not_entailment"], "label")
    return {**row, "gold": gold}


def cb(row: Row) -> Row:
    for name in ("premise", "hypothesis"):
        _text(row, name)
    gold = _index(_field(row, "label"), ["entailment", "contradiction", "neutral"], "label")
    return {**row, "gold": gold}


_SST_LINE = re.compile(r"__label__(\d+)\t(.*)")


def _sst(row: Row) -> tuple[int, str]:
    match = _SST_LINE.fullmatch(row["line"])
    if match is None:
        raise RecordError(f"expected '__label__N<TAB>sentence', got {row['line'][:60]!r}")
    label, sentence = int(match.group(1)), match.group(2)
    _index(label, [1, 2, 3, 4, 5], "label")
    if not sentence.strip():
        raise RecordError("the sentence is empty")
    return label, sentence


def sst5(row: Row) -> Row:
    label, sentence = _sst(row)
    return {"sentence": sentence, "label": label, "gold": label - 1, "source": row["source"]}


def sst2(row: Row) -> Row | None:
    label, sentence = _sst(row)
    if label == 3:  # neutral: not part of binary SST-2 (spec), dropped by definition
        return None
    return {"sentence": sentence, "label": label, "gold": int(label > 3), "source": row["source"]}


def agnews(row: Row) -> Row:
    for name in ("Title", "Description"):
        _text(row, name)
    gold = _index(_field(row, "Class Index"), ["1", "2", "3", "4"], "Class Index")
    return {
        "title": row["Title"],
        "description": row["Description"],
        "class_index": int(row["Class Index"]),
        "gold": gold,
        "source": row["source"],
    }


TREC_CLASSES = ["DESC", "ENTY", "LOC", "NUM", "ABBR", "HUM"]

# The paper's detokeniser, step by step (spec, "dcpmi_trec"); order matters.
_DETOKENIZE: list[tuple[str, str, bool]] = [
    ("`` ", '"', False),
    (" ''", '"', False),
    ("` ", '"', False),
    (" ' ", '" ', False),
    ("s '", "s'", False),
    (" @-@ ", "-", False),
    (" @,@ ", ",", False),
    (" @.@ ", ".", False),
    (" :", ":", False),
    (" ;", ";", False),
    (" .", ".", False),
    (" !", "!", False),
    (" ?", "?", False),
    (" ,", ",", False),
    (r"\(\s*([^\)]*?)\s*\)", r"(\1)", True),
    (r"\[\s*([^\]]*?)\s*\]", r"[\1]", True),
    (r"\{\s*([^\}]*?)\s*\}", r"{\1}", True),
    ("= = = =", "====", False),
    ("= = =", "===", False),
    ("= =", "==", False),
    (" ° ", "°", False),
    (" \n", "\n", False),
    ("\n ", "\n", False),
    (" N ", " 1 ", False),
    (" 's", "'s", False),
    (" n't ", "n't ", False),
    (" 'd ", "'d ", False),
    (" 'm ", "'m ", False),
    (" 're ", "'re ", False),
    (" 've ", "'ve ", False),
]


def detokenize(text: str) -> str:
    """Undo PTB tokenisation the way the paper's code did (TREC)."""
    for old, new, is_regex in _DETOKENIZE:
        text = re.sub(old, new, text) if is_regex else text.replace(old, new)
    return text


def trec(row: Row) -> Row:
    line = row["line"]
    head, _, rest = line.partition(" ")
    coarse, colon, _fine = head.partition(":")
    if not colon or not rest.strip():
        raise RecordError(f"expected 'COARSE:fine question words', got {line[:60]!r}")
    gold = _index(coarse, TREC_CLASSES, "coarse label")
    return {
        "question": detokenize(rest).strip(),
        "coarse": coarse,
        "gold": gold,
        "source": row["source"],
    }


def race(row: Row) -> Row:
    _text(row, "article")
    options = _options(_field(row, "options"), "options")
    letters = [chr(ord("A") + i) for i in range(len(options))]
    gold = _index(_field(row, "answer"), letters, "answer")
    question = _text(row, "question").strip()
    if question.startswith("."):
        question = question[1:]
    blank = question.find("_")
    # Cloze questions ("The author thinks _ .") are split at the first blank; the
    # rest of the question follows each option (spec). Wording is in the YAML.
    return {
        **row,
        "question": question,
        "is_cloze": blank >= 0,
        "before_blank": question[:blank].strip() if blank >= 0 else "",
        "after_blank": question[blank + 1 :].strip() if blank >= 0 else "",
        "gold": gold,
    }


_RECORDS: dict[str, Callable[[Row], Row | None]] = {
    "copa": copa,
    "storycloze": storycloze,
    "hellaswag": hellaswag,
    "question_choices": question_choices,
    "boolq": boolq,
    "rte": rte,
    "cb": cb,
    "sst2": sst2,
    "sst5": sst5,
    "agnews": agnews,
    "trec": trec,
    "race": race,
}


def get(name: str) -> Callable[[Row], Row | None]:
    try:
        return _RECORDS[name]
    except KeyError:
        raise ValueError(
            f"unknown record type {name!r} in dataset_kwargs; known: {', '.join(_RECORDS)}"
        ) from None
