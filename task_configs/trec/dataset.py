"""TREC (Li and Roth 2002), the test set as Zhao et al. 2021's file: coarse label, PTB-tokenised
question.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

import re

from lm_eval_dcpmi.data import RecordError, Row, Upstream, index_in

GITHUB = "https://raw.githubusercontent.com"
# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "trec/test.txt": Upstream(
        f"{GITHUB}/tonyzhaozh/few-shot-learning/main/data/trec/test.txt",
        sha256="69b2d406aa15b3b514b6bf9b3bf1fa2c3515ce7ae744651173f8e57347bfb2a9",
    ),
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
    gold = index_in(coarse, TREC_CLASSES, "coarse label")
    return {
        "question": detokenize(rest).strip(),
        "coarse": coarse,
        "gold": gold,
        "source": row["source"],
    }


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"trec": trec}
