"""RTE (SuperGLUE v2), the validation set: premise, hypothesis, entailment or not.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "rte/val.jsonl": Upstream(
        "https://dl.fbaipublicfiles.com/glue/superglue/data/v2/RTE.zip",
        "RTE/val.jsonl",
        sha256="ab990507bf5f35dc176cba7770a72bfa2c50a88ed72b8cc95cfbf9db95ab1af1",
    ),
}


def rte(row: Row) -> Row:
    for name in ("premise", "hypothesis"):
        nonempty(row, name)
    gold = index_in(field(row, "label"), ["entailment", "not_entailment"], "label")
    return {**row, "gold": gold}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"rte": rte}
