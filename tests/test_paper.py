"""The paper's task list, read from the YAMLs (lm_eval_dcpmi._paper)."""

from __future__ import annotations

import pytest

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi.errors import DCPMIConfigError

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast


def test_paper_tasks_in_the_papers_order_with_their_kinds():
    tasks = paper.paper_tasks()
    assert list(tasks) == [
        "dcpmi_copa",
        "dcpmi_storycloze",
        "dcpmi_hellaswag",
        "dcpmi_race_m",
        "dcpmi_race_h",
        "dcpmi_arc_easy",
        "dcpmi_arc_challenge",
        "dcpmi_obqa",
        "dcpmi_cqa",
        "dcpmi_boolq",
        "dcpmi_rte",
        "dcpmi_cb",
        "dcpmi_sst2",
        "dcpmi_sst5",
        "dcpmi_agn",
        "dcpmi_trec",
    ]
    assert paper.tasks_of_kind("mcqa") == tuple(list(tasks)[:9])
    assert paper.tasks_of_kind("classification") == tuple(list(tasks)[9:])
    assert paper.paper_order() == tuple(tasks)


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="choose from mcqa, classification"):
        paper.tasks_of_kind("qa")


def test_untagged_task_is_named(tmp_path):
    (tmp_path / "dcpmi.yaml").write_text("group: dcpmi\ntask: [a_task, b_task]\n")
    (tmp_path / "a.yaml").write_text("task: a_task\ntag: [dcpmi_mcqa]\nclass: !function x.Y\n")
    (tmp_path / "b.yaml").write_text("task: b_task\n")
    with pytest.raises(DCPMIConfigError, match=r"defines b_task with a tag"):
        paper._paper_tasks(tmp_path)


def test_study_members_flatten_nested_groups():
    subtasks = {"study": ["t0", "inner", "t0"], "inner": ["t1", "t2"]}
    assert paper.study_members("study", subtasks) == ["t0", "t1", "t2"]
    assert paper.study_members("absent", subtasks) == []
