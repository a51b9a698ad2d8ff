"""No silent all-tie DC-PMI: where a document's domain request is its conditional request,
DC-PMI scores every option 0 and the tie rule picks option 0.

The last-word rule splits a premise without an ASCII space at any Unicode whitespace (a
premise with one keeps its ASCII-space split, byte for byte); a premise with no whitespace
inside it (one word, punctuation alone, Chinese or Japanese) has no shorter premise: a
derived domain premise is refused when at least half the documents are such, and named in
a warning otherwise. Every document whose domain requests are its conditional requests
(written or derived premise) is counted by the task's ``tied_domain``, said in a warning
when the requests are built, and `dcpmi report` marks DC-PMI beside the count.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest
import yaml
from helpers import DESCRIPTION, assert_one_line_error, run_dcpmi, write_quiz, write_quiz_task

from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules import DEFAULT_LAYOUT, Layout
from lm_eval_dcpmi.task._document_checks import NO_LAST_WORD_SHARE
from lm_eval_dcpmi.task._references import has_last_word, last_word

# ------------------------------------------------------------------ the rule, by hand


@pytest.mark.fast
@pytest.mark.parametrize(
    ("premise", "expected", "shorter"),
    [
        # no ASCII space: the last whitespace of any kind, kept with the word
        ("Tab\tseparated\tlast", "\tlast", True),
        ("Non-breaking\u00a0space\u00a0end", "\u00a0end", True),
        ("Q:\nA:", "\nA:", True),
        ("全角\u3000空格", "\u3000空格", True),  # an ideographic space
        ("Tab\tlast\t \n", "\tlast", True),  # trailing whitespace first
        # no whitespace inside: the whole premise, which has no shorter premise
        ("Snow", "Snow", False),
        ("?!", "?!", False),
        ("今天天气很好，我们去公园散步吧。", "今天天气很好，我们去公园散步吧。", False),
        ("一年有几个月？", "一年有几个月？", False),
        (" Snow", " Snow", False),  # a leading space is no word boundary
        ("Snow \n", "Snow", False),
        # an ASCII space: from the last one on, whatever other whitespace follows it
        ("A man is sitting on a roof. he", " he", True),
        ("Q: What colour is fresh snow?\nA:", " snow?\nA:", True),
        ("a b\tc", " b\tc", True),
        ("Mixed\u00a0no-break and space", " space", True),
        ("two  spaces", " spaces", True),
    ],
)
def test_the_last_word(premise, expected, shorter):
    assert last_word(premise) == expected
    assert has_last_word(premise) is shorter


def old_last_word(premise: str) -> str:
    """The rule as it was (0.x): from the last ASCII space, else the whole premise."""
    text = premise.rstrip()
    return text[max(text.rfind(" "), 0) :]


@pytest.mark.fast
def test_a_premise_with_an_ascii_space_keeps_its_last_word_byte_for_byte():
    # committed results hold last words of premises with ASCII spaces: none may change
    pieces = ["a", "word.", "?", " ", " ", "\n", "\t", "\u00a0", "\u3000", "天气", "\r\n"]
    generator = random.Random(0)
    changed = 0
    for _ in range(5000):
        premise = "".join(generator.choice(pieces) for _ in range(generator.randint(1, 8)))
        if " " in premise.rstrip() or not any(c.isspace() for c in premise.rstrip()):
            assert last_word(premise) == old_last_word(premise), repr(premise)
        else:  # whitespace, none of it an ASCII space: split there now
            changed += last_word(premise) != old_last_word(premise)
    assert changed > 100


@pytest.mark.fast
def test_the_layout_names_the_reference_contexts_whose_requests_are_the_conditional_ones():
    same = [("Q", " a"), ("Q", " b")]
    assert DEFAULT_LAYOUT.tied([*same, *same], 2, False) == ("domain",)
    assert DEFAULT_LAYOUT.tied([*same, ("Q2", " a"), ("Q2", " b")], 2, False) == ()
    # one option alike is no tie of the document (several inputs: contexts per option)
    assert DEFAULT_LAYOUT.tied([*same, ("Q", " a"), ("R", " b")], 2, False) == ()
    layout = Layout(("domain", "answer"))
    assert layout.tied([*same, ("A:", " a"), ("A:", " b"), *same], 2, False) == ("answer",)


# ------------------------------------------------------------------ a task built


NO_PREMISE_YAML = (
    "task: {task}_dcpmi\nbase_task: {task}\nclass: !function lm_eval_dcpmi.task.DCPMITask\n"
)


def quiz_of_questions(folder: Path, questions: list[str]) -> Path:
    """The quiz whose prompt is the bare question, with these questions."""
    folder = write_quiz(folder, by_name=False)
    config = yaml.safe_load((folder / "quiz.yaml").read_text())
    config["doc_to_text"] = "{{question}}"
    (folder / "quiz.yaml").write_text(yaml.safe_dump(config, allow_unicode=True))
    data = Path(config["dataset_kwargs"]["data_files"]["test"])
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for row, question in zip(rows, questions, strict=True):
        row["question"] = question
    data.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    (folder / "quiz_dcpmi.yaml").write_text(NO_PREMISE_YAML.format(task="quiz"))
    return folder


# Four Chinese questions (no spaces between words), no gold option is option 0.
CHINESE = [
    {"question": "天空是什么颜色？", "choices": ["绿色", "蓝色", "红色"], "label": 1},
    {"question": "猫怎么叫？", "choices": ["汪汪", "喵喵", "嘎嘎"], "label": 1},
    {"question": "一年有几个月？", "choices": ["十", "十一", "十二"], "label": 2},
    {"question": "水在几度结冰？", "choices": ["一百度", "五十度", "零度"], "label": 2},
]
ZH_FIELDS = {"doc_to_text": "{{question}}", "doc_to_choice": "{{choices}}",
             "doc_to_target": "label"}  # fmt: skip


def chinese_task(folder: Path) -> Path:
    folder.mkdir()
    write_quiz_task(folder, "zh", CHINESE, **ZH_FIELDS)
    (folder / "zh_dcpmi.yaml").write_text(NO_PREMISE_YAML.format(task="zh"))
    return folder


def load(folder: Path, name: str):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder), include_defaults=False)
    return manager.load([name])["tasks"][name]


REFUSED = (
    "task {task} ({source}): the domain premise is each document's last word (none is "
    "written), but the premise (doc_to_text) of {k} of {n} documents has no whitespace inside "
    "it (one word, punctuation alone, or a script written without spaces, such as Chinese or "
    "Japanese), so it is its own last word (first: document 0, {first!r}): DC-PMI would "
    "compare it with itself, score every option 0 and pick option 0; write the domain premise "
    "instead (`domain_premise:` in the task's YAML, or --dcpmi_task TASK=PREMISE)."
)


def test_a_chinese_task_without_a_domain_premise_is_refused_when_built(tmp_path):
    folder = chinese_task(tmp_path / "tasks")
    with pytest.raises(DCPMIConfigError) as error:
        load(folder, "zh_dcpmi")
    assert str(error.value) == REFUSED.format(
        task="zh_dcpmi", source=folder / "zh_dcpmi.yaml", k=4, n=4, first="天空是什么颜色？"
    )


@pytest.mark.parametrize("questions", [["Snow", "?!", "Tab\tseparated\tlast"],
                                       ["Snow", "?!", "Which animal barks?"]])  # fmt: skip
def test_most_premises_without_a_last_word_refuse_the_derived_premise(tmp_path, questions):
    # the tab now splits: 2 of 3 documents without a last word, at least half
    assert NO_LAST_WORD_SHARE == 0.5
    folder = quiz_of_questions(tmp_path / "tasks", questions)
    with pytest.raises(DCPMIConfigError) as error:
        load(folder, "quiz_dcpmi")
    assert str(error.value) == REFUSED.format(
        task="quiz_dcpmi", source=folder / "quiz_dcpmi.yaml", k=2, n=3, first="Snow"
    )


def scored(task, answers: dict[int, list[float]]) -> list[dict]:
    """Each built document's metrics, given each request's loglikelihood."""
    task.build_all_requests(limit=None, rank=0, world_size=1)
    found = []
    for doc_id, doc in enumerate(task.eval_docs):
        found.append(task.process_results(doc, [(ll, False) for ll in answers[doc_id]]))
    return found


def test_a_few_premises_without_a_last_word_are_named_and_counted(tmp_path, caplog):
    folder = quiz_of_questions(
        tmp_path / "tasks", ["Non-breaking\u00a0space\u00a0end", "Snow", "How many legs?"]
    )
    with caplog.at_level(logging.WARNING):
        task = load(folder, "quiz_dcpmi")
        said = [r.getMessage() for r in caplog.records if "no whitespace inside" in r.getMessage()]
        assert said == [
            f"quiz_dcpmi ({folder / 'quiz_dcpmi.yaml'}): the domain premise is each document's "
            "last word, but the premise (doc_to_text) of 1 of 3 documents has no whitespace "
            "inside it (one word, punctuation alone, or a script written without spaces, such "
            "as Chinese or Japanese), so it is its own last word (first: document 1, 'Snow'): "
            "PMI there measures the premise against itself (without few-shot examples every "
            "option scores 0 and option 0 wins; the task's `tied_domain` metric counts them). "
            "To score them, write the domain premise instead (`domain_premise:` in the task's "
            "YAML, or --dcpmi_task TASK=PREMISE)."
        ]
        # conditional lls, then domain lls; "Snow" scores the same requests the same
        metrics = scored(
            task,
            {0: [-1.0, -2.0, -3.0, -2.0, -1.0, -1.0],
             1: [-4.0, -5.0, -6.0, -4.0, -5.0, -6.0],
             2: [-3.0, -2.0, -1.0, -3.0, -2.0, -2.0]},
        )  # fmt: skip
    domain = [tuple(i.arguments[:2]) for i in task.instances if i.doc_id in (0, 1)][3::6]
    assert domain == [(DESCRIPTION + "\u00a0end", " => white"), (DESCRIPTION + "Snow", " => a cat")]
    assert [m["tied_domain"] for m in metrics] == [0.0, 1.0, 0.0]
    assert task.aggregation()["tied_domain"]([m["tied_domain"] for m in metrics]) == 1.0
    # the tie rule's pick stands (dcpmi verify recomputes it so), the count says what it is
    assert [m["acc_dcpmi"] for m in metrics] == [1.0, 0.0, 1.0]
    warned = [r.getMessage() for r in caplog.records if "conditional requests" in r.getMessage()]
    assert warned == [
        f"quiz_dcpmi ({folder / 'quiz_dcpmi.yaml'}): 1 of 3 documents have domain requests that "
        "are their conditional requests (first: document 1, context 'A general knowledge "
        "quiz.\\n\\nSnow'): DC-PMI scores every option 0 there and the tie rule picks option 0, "
        "which says nothing of the method. Their number is the task's `tied_domain` metric, "
        "and `dcpmi report` marks DC-PMI beside it. Write a domain premise that is not the "
        "premise (`domain_premise:` in the task's YAML, or --dcpmi_task TASK=PREMISE)."
    ]


def test_a_written_domain_premise_that_renders_as_the_premise_is_counted(tmp_path, caplog):
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    (folder / "quiz_dcpmi.yaml").write_text(
        NO_PREMISE_YAML.format(task="quiz") + 'domain_premise: "Q: {{question}}\\nA:"\n'
    )
    with caplog.at_level(logging.WARNING):
        task = load(folder, "quiz_dcpmi")
        metrics = scored(task, {i: [-1.0, -2.0, -3.0] * 2 for i in range(3)})
    assert [m["tied_domain"] for m in metrics] == [1.0, 1.0, 1.0]
    assert any("3 of 3 documents have domain requests" in r.getMessage() for r in caplog.records)


def test_distinct_requests_count_no_tie(tmp_path, caplog):
    folder = write_quiz(tmp_path / "tasks", by_name=True)  # the domain premise "A:"
    with caplog.at_level(logging.WARNING):
        task = load(folder, "quiz_dcpmi")
        metrics = scored(task, {i: [-1.0, -2.0, -3.0] * 2 for i in range(3)})
    assert [m["tied_domain"] for m in metrics] == [0.0, 0.0, 0.0]
    assert not [r for r in caplog.records if "conditional requests" in r.getMessage()]


# ------------------------------------------------------------------ the report


@pytest.mark.fast
def test_the_report_marks_dcpmi_beside_its_ties():
    from report_helpers import entry, results_dict

    from lm_eval_dcpmi.report._results import run_from_dict
    from lm_eval_dcpmi.report._tables import markdown_report

    rows = {
        "tied": entry(0.3, 0.4, 0.45, 0.5, n=4, norm=0.42, **{"tied_domain,none": 4.0}),
        "untied": entry(0.3, 0.4, 0.45, 0.5, n=4, norm=0.42, **{"tied_domain,none": 0.0}),
        "older": entry(0.3, 0.4, 0.45, 0.5, n=4, norm=0.42),  # written before the count
    }
    report = markdown_report([run_from_dict(results_dict(rows), None)])
    table = [line.strip("| ").split(" | ") for line in report.splitlines() if line.startswith("| ")]
    column = table[0].index("DC-PMI")  # by its name: a rule added to the table adds a column
    dcpmi = {row[0]: row[column] for row in table[1:]}
    assert dcpmi == {"tied": "**50.0**‡", "untied": "**50.0**", "older": "**50.0**"}
    assert (
        "- ‡: DC-PMI is no measure of the method on some documents (tied_domain: tied 4 of 4): "
        "their domain requests are their conditional requests (a domain premise that renders "
        "as the premise, or a premise that is its own last word), so every option scores 0 and "
        "the tie rule picks option 0. Write a domain premise that is not the premise.\n"
    ) in report
    del rows["tied"]
    assert "‡" not in markdown_report([run_from_dict(results_dict(rows), None)])


# ------------------------------------------------------------------ dcpmi run


@pytest.mark.slow
def test_dcpmi_run_refuses_a_chinese_task_in_one_line_before_the_model_loads(tmp_path):
    folder = chinese_task(tmp_path / "tasks")
    (folder / "zh_dcpmi.yaml").unlink()  # the variant of the option alone
    completed = run_dcpmi(
        ["--include_path", str(folder), "--dcpmi_task", "zh", "--limit", "3",
         "--output_path", str(tmp_path / "out")]
    )  # fmt: skip
    assert_one_line_error(
        completed,
        REFUSED.format(
            task="zh_dcpmi",
            source=f"dcpmi run --dcpmi_task 'zh', the DC-PMI variant of zh ({folder / 'zh.yaml'})",
            k=4, n=4, first="天空是什么颜色？",
        ),
    )  # fmt: skip
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_dcpmi_run_counts_and_marks_a_premise_without_a_last_word(tmp_path):
    # one of three without a last word (two would be refused): named and counted
    questions = ["Snow?", "Which animal barks?", "How many legs has a spider?"]
    folder = quiz_of_questions(tmp_path / "tasks", questions)
    (folder / "quiz_dcpmi.yaml").unlink()  # the variant of the option alone
    output = tmp_path / "out"
    completed = run_dcpmi(
        ["--include_path", str(folder), "--dcpmi_task", "quiz", "--limit", "3",
         "--output_path", str(output)]
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert completed.stderr.count("of 3 documents has no whitespace inside it") == 1
    assert "1 of 3 documents have domain requests that are their conditional" in completed.stderr
    (path,) = output.rglob("results_*.json")
    results = json.loads(path.read_text())["results"]["quiz_dcpmi"]
    assert results["tied_domain,none"] == 1.0
    assert "‡ |" in completed.stdout  # the DC-PMI cell, the last
    assert "(tied_domain: quiz_dcpmi 1 of 3)" in completed.stdout
