"""OpenBookQA (Mihaylov et al. 2018), the test set (records: the shared ``question_choices``
reader in lm_eval_dcpmi/data/_records.py).

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Upstream

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "openbookqa/test.jsonl": Upstream(
        "https://ai2-public-datasets.s3.amazonaws.com/open_bookqa/OpenBookQA-V1-Sep2018.zip",
        "Data/Main/test.jsonl",
        sha256="feb2bd9bfa6161dca4c44ce90e51e8cdada83eb5061407fcdc5005e44aaf2313",
    ),
}

# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {}
