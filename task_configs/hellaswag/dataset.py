"""HellaSwag (Zellers et al. 2019), the validation set: a context, four endings.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty, option_texts

GITHUB = "https://raw.githubusercontent.com"
# The files its tasks read (paths in the data folder) and where each is downloaded from.
FILES = {
    "hellaswag/hellaswag_val.jsonl": Upstream(
        f"{GITHUB}/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
    ),
}


def hellaswag(row: Row) -> Row:
    nonempty(row, "ctx")
    endings = option_texts(field(row, "endings"), "endings")
    label = field(row, "label")
    if isinstance(label, str) and label.strip().isdigit():  # "3" as well as 3
        label = int(label)
    gold = index_in(label, range(len(endings)), "label")
    return {**row, "gold": gold}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"hellaswag": hellaswag}
