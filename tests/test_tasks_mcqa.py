"""The eight multiple-choice tasks (StoryCloze, HellaSwag, RACE, ARC, OpenBookQA, CQA).

On the real files in ../shared/data: the wording rules the first documents do not show
(each task's count and first documents are its folder's first_documents.json, checked by
tests/test_dataset_folders.py).
On small bad files in tmp_path: errors that name the file, the line or record, and
what is wrong.
"""

import json

import pytest
from helpers import load_task

from lm_eval_dcpmi.data import _loaders as data


def expected(premise: str, domain: str, options: list[str]) -> list[tuple[str, str]]:
    """One document's requests: every option after the premise, then after the domain."""
    return [(premise, o) for o in options] + [(domain, o) for o in options]


@pytest.fixture(scope="module")
def tasks(task_manager):
    loaded = {}

    def get(name):
        if name not in loaded:
            loaded[name] = load_task(task_manager, name)
        return loaded[name]

    return get


# --------------------------------------------------------------------- real files

ARTICLE_M = (
    "Take a class at Dulangkou School, and you'll see lots of things different from "
    "other schools, You can see the desks are not in rows and students sit in groups. "
    "They put their desks together so they're facing each other. How can they see the "
    "blackboard? There are three blackboards on the three walls of the classroom!\nThe "
    'school calls the new way of learning "Tuantuanzuo", meaning sitting in groups. '
    "Wei Liying, a Junior 3 teacher, said it was to give students more chances to "
    "communicate.\nEach group has five or six students, according to Wei, and they "
    "play different roles .There is a team leader who takes care of the whole group. "
    'There is a "study leader"who makes sure that everyone finishes their homework. '
    "And there is a discipline leader who makes sure that nobody chats in class.\nWang "
    "Lin is a team leader. The 15-year-old said that having to deal with so many "
    'things was tiring.\n"I just looked after my own business before,"said Wang. "But '
    'now I have to think about my five group members."\nBut Wang has got used to it '
    'and can see the benefits now.\n"I used to speak too little. But being a team '
    "leader means you have to talk a lot. You could even call me an excellent speaker "
    'today."\nZhang Qi, 16, was weak in English. She used to get about 70 in English '
    'tests. But in a recent test, Zhang got a grade of more than 80.\n"I rarely  asked '
    "others when I had problems with my English tests. But now I can ask the team "
    'leader or study leader. They are really helpful."'
)


# StoryCloze: a premise that ends in neither '.' nor '!' gets a '.'.
@pytest.mark.parametrize(
    ("index", "premise_end"),
    [
        (92, "He said she was beautiful in any dress she chose!"),  # '!' kept as is
        (169, "His boss asked him what was he going to do?."),  # '?' is not exempt
        (177, 'Her mom and dad responded, "go check in your room.".'),
        (361, "Gina figured she still had a whole day and a half to finish the report."),
    ],
)
def test_storycloze_final_period(tasks, index, premise_end):
    task = tasks("dcpmi_storycloze")
    premise = task.doc_to_text(task.eval_docs[index])
    assert premise.endswith(" " + premise_end)
    assert not premise.startswith(" ")


def test_race_question_without_blank(tasks):
    task = tasks("dcpmi_race_m")
    doc = task.eval_docs[3]  # 1.txt, question 4
    assert task.doc_to_text(doc) == (
        " " + ARTICLE_M + "\n question: How many leaders are there in one group? \n answer:"
    )
    assert task.doc_to_choice(doc) == ["  Three.", "  Four.", "  Two.", "  Five or six."]
    assert task.domain_premise(doc) == "?"
    assert doc["gold"] == 0


def test_race_leading_period_is_removed(tasks):
    task = tasks("dcpmi_race_m")
    doc = task.eval_docs[5]  # 1019.txt, question 2: '. From the passage we know, ...  _  .'
    assert doc["source"] == "race/test/middle/1019.txt question 2"
    assert task.doc_to_text(doc).endswith(
        "\n From the passage we know, when we visit a foreign country,"
    )
    assert task.doc_to_choice(doc) == [
        "  We'd better pay for ourselves. .",
        "  We should learn their language well. .",
        "  We'd better pay for others after meal. .",
        "  We have to learn both their language and culture. .",
    ]
    assert doc["gold"] == 3


def test_race_question_starting_with_blank(tasks):
    task = tasks("dcpmi_race_m")
    doc = task.eval_docs[36]  # 1133.txt, question 2: '_  is mentioned in the passage as ...'
    assert doc["source"] == "race/test/middle/1133.txt question 2"
    premise = task.doc_to_text(doc)
    assert premise.startswith(" Kitesurfing as a water sport began in the 1980s,")
    # The premise ends in '\n ' (the spec's 40 RACE-M items); lm-eval's models move that
    # whitespace into the continuation when they tokenise.
    assert premise.endswith("provides professional kitesurfing training and equipments.\n ")
    assert task.doc_to_choice(doc) == [
        "  Water is mentioned in the passage as the power of kitesurfing.",
        "  Wind is mentioned in the passage as the power of kitesurfing.",
        "  The sun is mentioned in the passage as the power of kitesurfing.",
        "  The kite is mentioned in the passage as the power of kitesurfing.",
    ]
    assert doc["gold"] == 1


@pytest.mark.parametrize("name", ["dcpmi_race_m", "dcpmi_race_h"])
def test_race_version_2_since_its_domain_requests_end_in_the_premises_whitespace(tasks, name):
    # 0.1.0 scored the 52 questions whose premise ends in '\n ' after '?' under version 1.0
    task = tasks(name)
    assert task.config.metadata["version"] == 2.0
    assert task.VERSION.startswith("2.0+premise.")


def test_arc_numeric_labels_and_other_option_counts(tasks):
    task = tasks("dcpmi_arc_easy")
    numeric = task.eval_docs[14]  # labels 1-4, answerKey "2"
    assert task.doc_to_text(numeric) == "All living and nonliving material is composed of"
    assert task.doc_to_choice(numeric) == [" air", " elements", " water", " soil"]
    assert numeric["gold"] == 1
    three = task.eval_docs[93]
    assert task.doc_to_choice(three) == [" decrease", " increase", " remain the same"]
    assert three["gold"] == 1
    five = task.eval_docs[500]
    assert task.doc_to_text(five) == "What gas in the air do we need to breathe in order to live?"
    assert task.doc_to_choice(five) == [
        " nitrogen",
        " oxygen",
        " carbon dioxide",
        " hydrogen",
        " water vapor",
    ]
    assert five["gold"] == 1


@pytest.mark.parametrize(
    ("index", "premise"),
    [
        (
            102,  # no final punctuation: nothing dropped
            " When learning about the world and different cultures, what is important if you "
            "are committed to eliminating preconceived notions? the answer is:",
        ),
        (
            116,  # final '.' dropped
            " Sailors drive many different types of boats, what type of boat involves their "
            "namesake? the answer is:",
        ),
        (
            362,  # 'what?.': only the last character is dropped
            " Batman bought beer.  There were no bottles available.  He had to settle for "
            "what?? the answer is:",
        ),
    ],
)
def test_cqa_premise_ending(tasks, index, premise):
    task = tasks("dcpmi_cqa")
    assert task.doc_to_text(task.eval_docs[index]) == premise


# --------------------------------------------------------------- small good files


def write_race(tmp_path, articles: dict[str, object], level: str = "middle") -> None:
    folder = tmp_path / "race" / "test" / level
    folder.mkdir(parents=True)
    for name, article in articles.items():
        text = article if isinstance(article, str) else json.dumps(article)
        (folder / name).write_text(text, encoding="utf-8")


def load_race(tmp_path, level: str = "middle"):
    return data.race_folder(f"race/test/{level}", record="race", data_dir=tmp_path)["test"]


def race_article(**fields):
    return {
        "article": "  An article.\n",
        "questions": ["What is it?", "It is ____ here."],
        "options": [["a", "b", "c", "d"], ["w", "x", "y", "z"]],
        "answers": ["A", "D"],
        "id": "x.txt",
        **fields,
    }


def test_race_files_in_name_order_and_four_underscore_blank(tasks, tmp_path):
    write_race(tmp_path, {"2.txt": race_article(), "10.txt": race_article(answers=["B", "C"])})
    docs = load_race(tmp_path)
    assert [d["source"] for d in docs] == [
        "race/test/middle/10.txt question 1",
        "race/test/middle/10.txt question 2",
        "race/test/middle/2.txt question 1",
        "race/test/middle/2.txt question 2",
    ]
    assert [d["gold"] for d in docs] == [1, 2, 0, 3]
    task = tasks("dcpmi_race_m")
    # The article is stripped; '____' is split at its first '_', leaving '___'.
    assert task.doc_to_text(docs[0]) == " An article.\n question: What is it? \n answer:"
    assert task.doc_to_text(docs[1]) == " An article.\n It is"
    assert task.doc_to_choice(docs[1]) == [
        "  w ___ here.",
        "  x ___ here.",
        "  y ___ here.",
        "  z ___ here.",
    ]


def test_cqa_options_are_lower_cased_and_quoted(tasks, tmp_path):
    (tmp_path / "commonsenseqa").mkdir()
    row = {
        "answerKey": "B",
        "id": "1",
        "question": {
            "stem": "Where is it!",
            "choices": [{"label": "A", "text": "New York"}, {"label": "B", "text": 'a "Big" Box'}],
        },
    }
    (tmp_path / "commonsenseqa" / "dev_rand_split.jsonl").write_text(json.dumps(row) + "\n")
    doc = data.jsonl("commonsenseqa/dev_rand_split.jsonl", "question_choices", tmp_path)["test"][0]
    task = tasks("dcpmi_cqa")
    assert task.doc_to_text(doc) == " Where is it? the answer is:"
    assert task.doc_to_choice(doc) == [' "new york"', ' "a "big" box"']
    assert doc["gold"] == 1


# --------------------------------------------------------------- small bad files

STORY_HEADER = (
    "InputStoryid\tInputSentence1\tInputSentence2\tInputSentence3\tInputSentence4\t"
    "RandomFifthSentenceQuiz1\tRandomFifthSentenceQuiz2\tAnswerRightEnding\n"
)
STORY_ROW = "id1\tS one.\tS two.\tS three.\tS four.\tEnd one.\tEnd two.\t1\n"


def load_story(tmp_path, text: str):
    (tmp_path / "storycloze").mkdir()
    (tmp_path / "storycloze" / "test_spring2016.tsv").write_text(text, encoding="utf-8")
    return data.tsv("storycloze/test_spring2016.tsv", record="storycloze", data_dir=tmp_path)


@pytest.mark.fast
def test_a_good_storycloze_file_loads(tmp_path):
    assert load_story(tmp_path, STORY_HEADER + STORY_ROW)["test"][0]["gold"] == 0


@pytest.mark.fast
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            STORY_HEADER + STORY_ROW + "id2\tS one.\tS two.\tS three.\tS four.\tEnd one.\t1\n",
            r"test_spring2016.tsv:3: expected 8 fields \(InputStoryid, .*\); the row has",
        ),
        (
            STORY_HEADER.replace("\tRandomFifthSentenceQuiz2", "")
            + STORY_ROW.replace("\tEnd two.", ""),
            r"test_spring2016.tsv:2: missing field 'RandomFifthSentenceQuiz2'",
        ),
        (
            STORY_HEADER + STORY_ROW + STORY_ROW.replace("\t1\n", "\t3\n"),
            r"test_spring2016.tsv:3: AnswerRightEnding '3' is not one of \['1', '2'\]",
        ),
        (
            STORY_HEADER + STORY_ROW + STORY_ROW.replace("End one.", " "),
            r"test_spring2016.tsv:3: field 'RandomFifthSentenceQuiz1' is empty",
        ),
    ],
    ids=["short-row", "missing-field", "label", "empty-option"],
)
def test_bad_storycloze_rows(tmp_path, text, message):
    with pytest.raises(data.DataError, match=r"^storycloze/" + message):
        load_story(tmp_path, text)


HS_GOOD = {"ind": 0, "ctx": "A man sits. he", "endings": ["a.", "b.", "c.", "d."], "label": 3}


def load_jsonl(tmp_path, file: str, record: str, lines: list[str]):
    (tmp_path / file).parent.mkdir(parents=True)
    (tmp_path / file).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return data.jsonl(file, record=record, data_dir=tmp_path)


@pytest.mark.fast
def test_a_good_hellaswag_file_loads(tmp_path):
    # Labels as numbers or as digit strings (consistently, one type per file).
    lines = [json.dumps({**HS_GOOD, "label": "3"}), "", json.dumps({**HS_GOOD, "label": "1"})]
    docs = load_jsonl(tmp_path, "hellaswag/hellaswag_val.jsonl", "hellaswag", lines)["test"]
    assert [d["gold"] for d in docs] == [3, 1]
    assert [d["source"] for d in docs] == [
        "hellaswag/hellaswag_val.jsonl:1",
        "hellaswag/hellaswag_val.jsonl:3",
    ]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"ctx": "A man sits. he", "endings": [', r":2: not valid JSON"),
        ("[1, 2]", r":2: expected a JSON object per line"),
        (
            json.dumps({k: v for k, v in HS_GOOD.items() if k != "ctx"}),
            r":2: missing field 'ctx' \(fields present: endings, ind, label\)",
        ),
        (json.dumps({**HS_GOOD, "label": 4}), r":2: label 4 is not one of \[0, 1, 2, 3\]"),
        (json.dumps({**HS_GOOD, "label": "x"}), r":2: label 'x' is not one of \[0, 1, 2, 3\]"),
        (
            json.dumps({**HS_GOOD, "endings": ["a.", "", "c.", "d."]}),
            r":2: option 2 of 'endings' is empty",
        ),
        (json.dumps({**HS_GOOD, "ctx": "  "}), r":2: field 'ctx' is empty"),
    ],
    ids=[
        "bad-json",
        "not-object",
        "missing-field",
        "label",
        "label-text",
        "empty-ending",
        "empty-ctx",
    ],
)
def test_bad_hellaswag_lines(tmp_path, line, message):
    lines = [json.dumps(HS_GOOD), line]
    with pytest.raises(data.DataError, match=r"^hellaswag/hellaswag_val\.jsonl" + message):
        load_jsonl(tmp_path, "hellaswag/hellaswag_val.jsonl", "hellaswag", lines)


QC_GOOD = {
    "id": "q1",
    "question": {
        "stem": "What is it?",
        "choices": [
            {"text": "one", "label": "A"},
            {"text": "two", "label": "B"},
            {"text": "three", "label": "C"},
            {"text": "four", "label": "D"},
        ],
    },
    "answerKey": "C",
}
# ARC, OpenBookQA and CommonsenseQA share this record type; one file stands for all.
QC_FILE = "arc/ARC-Easy-Test.jsonl"


def with_question(**fields):
    return {**QC_GOOD, "question": {**QC_GOOD["question"], **fields}}


@pytest.mark.fast
def test_a_good_question_choices_file_loads(tmp_path):
    numeric = {
        **QC_GOOD,
        "question": {
            "stem": "Which?",
            "choices": [{"text": t, "label": str(n)} for n, t in enumerate("wxyz", 1)],
        },
        "answerKey": "4",
    }
    lines = [json.dumps(QC_GOOD), json.dumps(numeric)]
    docs = load_jsonl(tmp_path, QC_FILE, "question_choices", lines)["test"]
    assert [d["gold"] for d in docs] == [2, 3]
    assert docs[0]["choices"] == ["one", "two", "three", "four"]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"id": "q2", "question": {"stem": "Why?"', r":2: not valid JSON"),
        (
            json.dumps({**QC_GOOD, "answerKey": "F"}),
            r":2: answerKey 'F' is not one of \['A', 'B', 'C', 'D'\]",
        ),
        (
            json.dumps({k: v for k, v in QC_GOOD.items() if k != "answerKey"}),
            r":2: missing field 'answerKey'",
        ),
        (
            json.dumps({k: v for k, v in QC_GOOD.items() if k != "question"}),
            r":2: missing field 'question'",
        ),
        (
            json.dumps({**QC_GOOD, "question": {"choices": QC_GOOD["question"]["choices"]}}),
            r":2: missing field 'stem'",
        ),
        (
            json.dumps(
                with_question(
                    choices=[*QC_GOOD["question"]["choices"][:2], {"text": " ", "label": "C"}]
                )
            ),
            r":2: option 3 of 'question.choices' is empty",
        ),
        (
            json.dumps(with_question(choices=[{"text": "one", "label": "A"}])),
            r":2: 'question.choices' must list at least two options",
        ),
    ],
    ids=[
        "bad-json",
        "label",
        "no-answerKey",
        "no-question",
        "no-stem",
        "empty-option",
        "one-option",
    ],
)
def test_bad_question_choices_lines(tmp_path, row, message):
    lines = [json.dumps(QC_GOOD), row]
    with pytest.raises(data.DataError, match=r"^arc/ARC-Easy-Test\.jsonl" + message):
        load_jsonl(tmp_path, QC_FILE, "question_choices", lines)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("article", "message"),
    [
        (
            race_article(options=[["a", "b", "c", "d"]]),
            r"2\.txt: 2 questions, 1 option lists and 2 answers; they must match one to one",
        ),
        (
            {k: v for k, v in race_article().items() if k != "answers"},
            r"2\.txt: missing field 'answers'",
        ),
        (
            '{"article": "An article.", "questions": [',
            r"2\.txt:1: not valid JSON at column 42 \(Expecting value\)",
        ),
        ([race_article()], r"2\.txt: expected one JSON object \(a RACE article\) per file"),
        (
            race_article(answers=["A", "E"]),
            r"2\.txt question 2: answer 'E' is not one of \['A', 'B', 'C', 'D'\]",
        ),
        (
            race_article(options=[["a", "b", "c", "d"], ["w", "x", "", "z"]]),
            r"2\.txt question 2: option 3 of 'options' is empty",
        ),
        (
            race_article(questions=["What is it?", " "]),
            r"2\.txt question 2: field 'question' is empty",
        ),
        (race_article(article=""), r"2\.txt question 1: field 'article' is empty"),
    ],
    ids=[
        "mismatched",
        "missing",
        "bad-json",
        "not-object",
        "answer",
        "empty-option",
        "empty-q",
        "empty-article",
    ],
)
def test_bad_race_files(tmp_path, article, message):
    write_race(tmp_path, {"1.txt": race_article(), "2.txt": article})
    with pytest.raises(data.DataError, match="^race/test/middle/" + message):
        load_race(tmp_path)


@pytest.mark.fast
def test_race_folder_without_articles(tmp_path):
    (tmp_path / "race" / "test" / "high").mkdir(parents=True)
    with pytest.raises(data.DataError, match=r"^race/test/high: no \*\.txt article files in "):
        load_race(tmp_path, "high")
