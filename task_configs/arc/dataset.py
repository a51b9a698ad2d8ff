"""ARC (Clark et al. 2018), the Easy and Challenge test sets (records: the shared
``question_choices`` reader in lm_eval_dcpmi/data/_records.py).

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Upstream

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "arc/ARC-Easy-Test.jsonl": Upstream(
        "https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip",
        "ARC-Easy/ARC-Easy-Test.jsonl",
        sha256="ce32a0774b4beb1977d2c6b16dda5dd2b24fdc9c7f506882c452678676bd09be",
    ),
    "arc/ARC-Challenge-Test.jsonl": Upstream(
        "https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip",
        "ARC-Challenge/ARC-Challenge-Test.jsonl",
        sha256="9fa8ffb3e3a1f88cb302d53dd95aae81e39209ad9bcf974376b319d8fd35717c",
    ),
}

# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {}
