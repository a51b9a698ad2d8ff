"""AG News (Zhang et al. 2015), the test set as Zhao et al. 2021's CSV: title, description, class.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

GITHUB = "https://raw.githubusercontent.com"
# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "agnews/test.csv": Upstream(
        f"{GITHUB}/tonyzhaozh/few-shot-learning/main/data/agnews/test.csv",
        sha256="1b1b6c5f1dd034c83fec3f585611d2bc65c34fafd86685fc92cee5e6059313ef",
    ),
}


def agnews(row: Row) -> Row:
    for name in ("Title", "Description"):
        nonempty(row, name)
    gold = index_in(field(row, "Class Index"), ["1", "2", "3", "4"], "Class Index")
    return {
        "title": row["Title"],
        "description": row["Description"],
        "class_index": int(row["Class Index"]),
        "gold": gold,
        "source": row["source"],
    }


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"agnews": agnews}
