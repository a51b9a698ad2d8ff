"""ARC (Clark et al. 2018), the Easy and Challenge test sets (records: the shared
``question_choices`` reader in lm_eval_dcpmi/data/_records.py).

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Upstream

# The files its tasks read (paths in the data folder) and where each is downloaded from.
FILES = {
    "arc/ARC-Easy-Test.jsonl": Upstream(
        "https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip",
        "ARC-Easy/ARC-Easy-Test.jsonl",
    ),
    "arc/ARC-Challenge-Test.jsonl": Upstream(
        "https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip",
        "ARC-Challenge/ARC-Challenge-Test.jsonl",
    ),
}

# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {}
