"""AG News (Zhang et al. 2015), the test set as Zhao et al. 2021's CSV: title, description, class.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

GITHUB = "https://raw.githubusercontent.com"
# The files its tasks read (paths in the data folder) and where each is downloaded from.
FILES = {
    "agnews/test.csv": Upstream(f"{GITHUB}/tonyzhaozh/few-shot-learning/main/data/agnews/test.csv"),
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
