"""SST (Socher et al. 2013), the test set as fine-grained labelled lines: SST-5 and (without
the neutral label 3) SST-2.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

import re

from lm_eval_dcpmi.data import RecordError, Row, Upstream, index_in

GITHUB = "https://raw.githubusercontent.com"
# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "sst/sst_test.txt": Upstream(
        f"{GITHUB}/prrao87/fine-grained-sentiment/master/data/sst/sst_test.txt",
        sha256="ae78588874d7653eb416992014ccc9ead5d3540e3f83158186202c9a5bf9461b",
    ),
    # the few-shot study's example pool (task_configs/sst/fewshot/)
    "sst/sst_train.txt": Upstream(
        f"{GITHUB}/prrao87/fine-grained-sentiment/master/data/sst/sst_train.txt",
        sha256="1e30d2895f7b1569f9faa42a5e7b0da03dab41439cff08c65b6eb11c8f9ba707",
    ),
}


_SST_LINE = re.compile(r"__label__(\d+)\t(.*)")


def _sst(row: Row) -> tuple[int, str]:
    match = _SST_LINE.fullmatch(row["line"])
    if match is None:
        raise RecordError(f"expected '__label__N<TAB>sentence', got {row['line'][:60]!r}")
    label, sentence = int(match.group(1)), match.group(2)
    index_in(label, [1, 2, 3, 4, 5], "label")
    if not sentence.strip():
        raise RecordError("the sentence is empty")
    return label, sentence


def sst5(row: Row) -> Row:
    label, sentence = _sst(row)
    return {"sentence": sentence, "label": label, "gold": label - 1, "source": row["source"]}


def sst2(row: Row) -> Row | None:
    label, sentence = _sst(row)
    if label == 3:  # neutral: not part of binary SST-2 (spec), dropped by definition
        return None
    return {"sentence": sentence, "label": label, "gold": int(label > 3), "source": row["source"]}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"sst2": sst2, "sst5": sst5}
