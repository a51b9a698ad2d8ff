"""StoryCloze (Mostafazadeh et al. 2016), the spring 2016 test set: four sentences, two endings.

The folder's README.md says where the data comes from and what the tasks score."""

from __future__ import annotations

from lm_eval_dcpmi.data import Row, Upstream, field, index_in, nonempty

GITHUB = "https://raw.githubusercontent.com"
# The files its tasks read (paths in the data folder), where each is downloaded from and
# its sha256 (checked after each download; a folder's: lm_eval_dcpmi/data/_digests.py).
FILES = {
    "storycloze/test_spring2016.tsv": Upstream(
        f"{GITHUB}/snigdhac/StoryComprehension_EMNLP/master/Dataset/RoCStories/test_spring2016.tsv",
        sha256="953ab7cd4e4956fb0df5945c08ca3d5894e024ba552efd3c5c9cf5622e97f309",
    ),
}


def storycloze(row: Row) -> Row:
    for name in (
        "InputSentence1",
        "InputSentence2",
        "InputSentence3",
        "InputSentence4",
        "RandomFifthSentenceQuiz1",
        "RandomFifthSentenceQuiz2",
    ):
        nonempty(row, name)
    gold = index_in(field(row, "AnswerRightEnding"), ["1", "2"], "AnswerRightEnding")
    return {**row, "gold": gold}


# The record readers its YAMLs name (dataset_kwargs.record).
RECORDS = {"storycloze": storycloze}
