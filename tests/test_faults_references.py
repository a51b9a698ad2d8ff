"""Reference contexts and content-free fields on a user's task (issue 29, items 1-3): a
content-free field the prompt does not show, a null field in a reference context, a
reference-context name given twice; and batch calibration on few documents (item 17).
Each ends in one error when the task is built (or a warning), whatever --limit. The tasks
built alone (no lm-eval task index, local data) are in the fast tier; the runs use
lm-eval's dummy model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers import load_quiz, write_quiz_task

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.errors import DCPMIConfigError

RECORDS = [
    {"question": "What is snow?", "hint": "Colours.", "topic": "nature", "label": 0},
    {"question": "Which animal barks?", "hint": "Pets.", "topic": "animals", "label": 1},
    {"question": "What is wet?", "hint": "Things.", "topic": "nature", "label": 0},
]

FIELDS = {
    "doc_to_text": "Q: {{question}} ({{hint}})\nA:",
    "doc_to_choice": [" yes", " no"],
    "doc_to_target": "label",
    "domain_premise": "A:",
}


def write_task(folder: Path, extra: str, records: list[dict] = RECORDS) -> Path:
    """The task ``quiz_ref`` with the YAML lines ``extra`` added."""
    path = write_quiz_task(folder, "quiz_ref", records, dcpmi=True, **FIELDS)
    path.write_text(path.read_text() + extra)
    return path


def load(folder: Path):
    return load_quiz(folder, "quiz_ref")


def refused(folder: Path) -> str:
    with pytest.raises(DCPMIConfigError) as caught:
        load(folder)
    return str(caught.value)


# ---- 1: content-free fields


@pytest.mark.fast
def test_content_free_field_the_prompt_does_not_show_is_refused(tmp_path):
    path = write_task(tmp_path, "content_free_fields: [topic]\n")
    assert refused(tmp_path) == (
        f"task quiz_ref ({path}), document 0: the content-free field 'topic' does not change "
        "the prompt (doc_to_text renders the same whatever it holds), so CC's content-free "
        "prompts would be this document's own. List in `content_free_fields:` the fields "
        "whose text the prompt shows (the document's fields: hint, label, question, topic)."
    )


@pytest.mark.fast
def test_content_free_prompt_that_keeps_another_field_warns_naming_it(tmp_path, caplog):
    path = write_task(tmp_path, "content_free_fields: [question]\n")
    with caplog.at_level(logging.WARNING):
        task = load(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if "content-free prompts keep" in r.message]
    assert warnings == [
        f"quiz_ref ({path}): the content-free prompts keep document 0's field(s) 'hint' (the "
        "prompt shows them beside `content_free_fields: ['question']`), so they are not free "
        "of content. Add the fields that hold the input to `content_free_fields:`."
    ]
    assert task.content_free_context(task.eval_docs[0], "N/A") == "Q: N/A (Colours.)\nA:"


@pytest.mark.fast
def test_content_free_fields_that_hold_the_whole_input_do_not_warn(tmp_path, caplog):
    write_task(tmp_path, "content_free_fields: [question, hint]\n")
    with caplog.at_level(logging.WARNING):
        task = load(tmp_path)
    assert not [r for r in caplog.records if "content-free" in r.getMessage()]
    assert task.content_free_context(task.eval_docs[0], "N/A") == "Q: N/A (N/A)\nA:"


# ---- 2: null fields in every reference context


def test_null_field_in_a_reference_context_is_refused_whatever_the_limit(tmp_path, capsys):
    records = [*RECORDS[:2], {k: v for k, v in RECORDS[2].items() if k != "topic"}]
    path = write_task(tmp_path, 'reference_contexts: {terse: "{{ topic }}:"}\n', records)
    # --limit 2 scores documents 0 and 1; document 2 is checked all the same.
    argv = ["run", "--model", "dummy", "--include_path", str(tmp_path), "--tasks", "quiz_ref"]
    assert cli.main([*argv, "--limit", "2"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"dcpmi: task quiz_ref ({path}), document 2: the terse premise '{{{{ topic }}}}:' uses "
        "the field 'topic', missing (null) in this document; add it to the record (a key "
        "missing from a JSON record reads as null), or let the template skip it: `{% if "
        "topic is not none %}...{% endif %}`."
    )


# ---- 3: reference-context names


@pytest.mark.fast
def test_reference_context_named_twice_is_refused_naming_it(tmp_path):
    path = write_task(
        tmp_path,
        "reference_contexts:\n  terse: 'A:'\n  empty: {kind: empty}\n  terse: 'Answer:'\n",
    )
    assert refused(tmp_path) == (
        f"task quiz_ref ({path}): `reference_contexts:` names 'terse' more than once (YAML "
        "keeps the last one alone); give each reference context its own name."
    )


@pytest.mark.fast
@pytest.mark.parametrize(("value", "shown"), [("[]", "list []"), ("", "NoneType None")])
def test_reference_contexts_that_map_nothing_are_refused(tmp_path, value, shown):
    path = write_task(tmp_path, f"reference_contexts: {value}\n")
    assert refused(tmp_path) == (
        f"task quiz_ref ({path}): `reference_contexts:` must map names to premises, e.g. "
        f'`{{answer: "Answer:", empty: {{kind: empty}}}}`; got {shown}.'
    )


@pytest.mark.fast
def test_reference_contexts_with_one_name_each_load(tmp_path):
    write_task(tmp_path, "reference_contexts:\n  terse: 'A:'\n  empty: {kind: empty}\n")
    assert [r.name for r in load(tmp_path).references] == ["domain", "terse", "empty"]


# ---- 17: batch calibration on few documents


@pytest.mark.parametrize(
    ("limit", "warning"),
    [
        (
            "1",
            "quiz_ref: acc_bc rests on 1 document: dividing by its own probabilities leaves "
            "every option the same score, so BC picks option 0 (the tie rule). Evaluate 20 "
            "documents or more for a meaningful acc_bc.",
        ),
        (
            "3",
            "quiz_ref: acc_bc rests on 3 documents, fewer than 20: its prior, their mean "
            "probabilities, is mostly their own noise. Evaluate more documents for a "
            "meaningful acc_bc.",
        ),
    ],
)
def test_acc_bc_on_few_documents_warns(tmp_path, caplog, limit, warning):
    # lm-eval's Python API, as a user calls it (the model does not matter: dummy).
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    write_task(tmp_path, "content_free_fields: [question, hint]\n")
    manager = TaskManager(include_path=str(tmp_path), include_defaults=False)
    with caplog.at_level(logging.WARNING):
        results = simple_evaluate(
            model="dummy", tasks=["quiz_ref"], task_manager=manager, limit=int(limit)
        )
    if limit == "1":  # document 0's gold is option 0, which BC picks whatever the scores
        assert results["results"]["quiz_ref"]["acc_bc,none"] == 1.0
    assert [r.getMessage() for r in caplog.records if "acc_bc rests" in r.getMessage()] == [warning]
