"""HellaSwag (Zellers et al. 2019), the validation set: a context, four endings.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import (
    KnownCopy,
    Row,
    Upstream,
    field,
    index_in,
    nonempty,
    option_texts,
)

GITHUB = "https://raw.githubusercontent.com"
# ../shared/data holds a REBUILT copy of the file, not the upstream one (its README; docs/
# tasks.md, Data): the committed results and first_documents.json were made on it. A
# download or dcpmi fetch accepts it too, and dcpmi verify names it when the digests differ.
REBUILT_SHA256 = "528858e8d59c5ac5b797f3479f3d15d40050c1fea37b123bd7e77a4889d41bfe"
# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download): the upstream file's, 12,246,618 bytes, as
# TensorFlow Datasets records it too (tensorflow_datasets/url_checksums/hellaswag.txt).
FILES = {
    "hellaswag/hellaswag_val.jsonl": Upstream(
        f"{GITHUB}/rowanz/hellaswag/master/data/hellaswag_val.jsonl",
        sha256="0aa3b88843990f3f10a97b9575c94d7b71fb2205240ba04ae4884d9e9c992588",
        copies=(
            KnownCopy(
                REBUILT_SHA256,
                "the rebuilt HellaSwag file that the committed results were scored on "
                "(described in docs/tasks.md under Data)",
            ),
        ),
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
