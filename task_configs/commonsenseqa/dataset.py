"""CommonsenseQA (Talmor et al. 2019), the dev set (records: the shared ``question_choices``
reader in lm_eval_dcpmi/data/_records.py).

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Upstream

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "commonsenseqa/dev_rand_split.jsonl": Upstream(
        "https://s3.amazonaws.com/commensenseqa/dev_rand_split.jsonl",
        sha256="3210497fdaae614ac085d9eb873dd7f4d49b6f965a93adadc803e1229fd8a02a",
    ),
}

# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {}
