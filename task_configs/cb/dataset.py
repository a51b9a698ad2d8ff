"""CommitmentBank (SuperGLUE v2), the validation set: premise, hypothesis, three labels.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "cb/val.jsonl": Upstream(
        "https://dl.fbaipublicfiles.com/glue/superglue/data/v2/CB.zip",
        "CB/val.jsonl",
        sha256="c6125587e9601560cb16ea223c33964c5a915568d2af68a81f651b6ef25395ec",
    ),
}


def cb(row: Row) -> Row:
    for name in ("premise", "hypothesis"):
        nonempty(row, name)
    gold = index_in(field(row, "label"), ["entailment", "contradiction", "neutral"], "label")
    return {**row, "gold": gold}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"cb": cb}
