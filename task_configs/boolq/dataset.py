"""BoolQ (Clark et al. 2019), the dev set: a passage title, a yes/no question.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "boolq/dev.jsonl": Upstream(
        "https://storage.googleapis.com/boolq/dev.jsonl",
        sha256="ebc29ea3808c5c611672384b3de56e83349fe38fc1fe876fd29b674d81d0a80a",
    ),
}


def boolq(row: Row) -> Row:
    for name in ("question", "title"):
        nonempty(row, name)
    gold = index_in(field(row, "answer"), [True, False], "answer")
    return {**row, "gold": gold}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"boolq": boolq}
