"""`dcpmi tasks` and `dcpmi run --tasks list`: the plugin's groups, tags and tasks, one line
each; a task name with a typo gets the closest registered names."""

from __future__ import annotations

from pathlib import Path

import pytest

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi import cli, task_configs_dir
from lm_eval_dcpmi.cli import _tasks as task_list


def defined_tasks() -> set[str]:
    """The task names the YAMLs of task_configs define (not their groups)."""
    configs = Path(task_configs_dir())
    found = (paper.load_yaml(path) for path in configs.rglob("*.yaml"))
    return {c["task"] for c in found if isinstance(c.get("task"), str) and "group" not in c}


def tagged_tasks(tag: str) -> list[str]:
    """The task names whose YAML in task_configs lists ``tag`` under ``tag:``."""
    configs = Path(task_configs_dir())
    found = (paper.load_yaml(path) for path in configs.rglob("*.yaml"))
    tags = ((c, c.get("tag") or []) for c in found if "group" not in c)
    return [
        c["task"] for c, listed in tags if tag in ([listed] if isinstance(listed, str) else listed)
    ]


def listing(capsys, *argv: str) -> list[str]:
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.fast
def test_dcpmi_tasks_lists_groups_tags_and_tasks_one_line_each(capsys, monkeypatch):
    monkeypatch.delenv("DCPMI_DATA_DIR", raising=False)
    out = listing(capsys, "tasks")
    assert out[:3] == [
        "Groups and tags (`--tasks NAME` runs all their tasks):",
        "  dcpmi                       group   16 tasks  the paper's 16 zero-shot tasks; the "
        "unweighted mean of each accuracy",
        "  dcpmi_lm_eval               group   66 tasks  DC-PMI variants of lm-eval's own tasks "
        "(lm-eval's data and prompts)",
    ]
    assert (
        "  dcpmi_mcqa                  tag      9 tasks  the paper's multiple-choice QA and "
        "completion tasks"
    ) in out
    assert (
        "  mmlu_dcpmi                  group   57 tasks  lm-eval's MMLU with DC-PMI, one task "
        "per subject"
    ) in out
    tasks = out[out.index("Tasks (name, kind, data file):") + 1 :]
    assert tasks[0] == "  dcpmi_copa                  mcqa                    copa/copa-dev.xml"
    assert tasks[15] == "  dcpmi_trec                  classification          trec/test.txt"
    assert "  piqa_dcpmi                  lm-eval variant         lm-eval's piqa" in tasks
    assert "  dcpmi_copa_flipped          study                   copa/copa-dev.xml" in tasks
    names = [line.split()[0] for line in tasks[:-2]]
    assert names.index("dcpmi_sst2_v2") < names.index("dcpmi_sst2_v10")
    # every task a YAML of task_configs defines, once (MMLU's subjects only with --all)
    assert len(names) == len(set(names)) and set(names) == defined_tasks() - set(
        task_list.leaves("mmlu_dcpmi", task_list.plugin_entries())
    )
    assert tasks[-2:] == [
        "  ... and 57 tasks of nested groups (MMLU's subjects): dcpmi tasks --all",
        "(Set DCPMI_DATA_DIR, e.g. to ../shared/data, to count each split's documents.)",
    ]
    everything = listing(capsys, "tasks", "--all")
    assert "mmlu_anatomy_dcpmi" in {line.split()[0] for line in everything if line.strip()}


@pytest.mark.fast
def test_dcpmi_run_tasks_list_is_dcpmi_tasks(capsys, monkeypatch):
    monkeypatch.delenv("DCPMI_DATA_DIR", raising=False)
    assert listing(capsys, "run", "--tasks", "list") == listing(capsys, "tasks")


@pytest.mark.usefixtures("data_dir")
def test_with_the_data_each_task_counts_its_documents(capsys):
    out = listing(capsys, "tasks")
    assert any(line.startswith("Tasks (name, kind, documents in the split, from") for line in out)
    rows = {line.split()[0]: line.split()[1:] for line in out if line.startswith("  dcpmi_")}
    assert rows["dcpmi_copa"] == ["mcqa", "500", "copa/copa-dev.xml"]
    assert rows["dcpmi_sst2"] == ["classification", "1821", "sst/sst_test.txt"]
    assert rows["dcpmi_hellaswag"][1] == "10042" and rows["dcpmi_agn"][1] == "7600"
    assert rows["dcpmi_sst2_4shot_set0"][1] == "1821"


@pytest.mark.fast
def test_groups_count_their_tasks_through_nested_groups_and_tags():
    entries = task_list.plugin_entries()
    assert len(task_list.leaves("mmlu_dcpmi", entries)) == 57
    # A tag's tasks are the YAMLs that name it (read here as plain YAML): a new dataset folder
    # that joins the tag is counted with nothing else changed.
    classification = tagged_tasks("dcpmi_classification")
    assert {"dcpmi_cb", "dcpmi_sst2", "dcpmi_trec"} <= set(classification)
    assert task_list.leaves("dcpmi_classification", entries) == sorted(classification)
    assert entries["dcpmi_priors_copa"].config["dataset_kwargs"]["file"] == "copa/copa-dev.xml"
