"""RACE (Lai et al. 2017), the middle- and high-school test sets: one JSON article per file, one
record per question.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty, option_texts

# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "race/test/middle": Upstream(
        "http://www.cs.cmu.edu/~glai1/data/race/RACE.tar.gz",
        "RACE/test/middle",
        sha256="b9dc67df58526e8ddc39999c2131337d8b8b64cf6a445402ce1ea5c85533bde5",
    ),
    "race/test/high": Upstream(
        "http://www.cs.cmu.edu/~glai1/data/race/RACE.tar.gz",
        "RACE/test/high",
        sha256="d93bac2b51b3697b3a513344918e3bb22e9367064688ea3c6bee89a43df61cd0",
    ),
}


def race(row: Row) -> Row:
    nonempty(row, "article")
    options = option_texts(field(row, "options"), "options")
    letters = [chr(ord("A") + i) for i in range(len(options))]
    gold = index_in(field(row, "answer"), letters, "answer")
    question = nonempty(row, "question").strip()
    if question.startswith("."):
        question = question[1:]
    blank = question.find("_")
    # Cloze questions ("The author thinks _ .") are split at the first blank; the
    # rest of the question follows each option (spec). Wording is in the YAML.
    return {
        **row,
        "question": question,
        "is_cloze": blank >= 0,
        "before_blank": question[:blank].strip() if blank >= 0 else "",
        "after_blank": question[blank + 1 :].strip() if blank >= 0 else "",
        "gold": gold,
    }


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"race": race}
