"""The paper's task list, read from the plugin's YAMLs: the one source of truth.

* ``paper_tasks()``: the 16 zero-shot tasks of Holtzman et al. (2021), in the paper's
  order (the ``task:`` list of ``task_configs/dcpmi.yaml``), each with its kind, read from
  the task YAML's ``tag:`` (``dcpmi_mcqa`` -> ``"mcqa"``, ``dcpmi_classification`` ->
  ``"classification"``).
* ``STUDIES``: the groups of the paper's robustness studies; a report shows the mean and
  spread of each method over such a group's tasks.

Import-light on purpose (PyYAML only, no lm-eval): the report and the benchmark script use
it, and the YAMLs' ``!function`` tags are read as plain strings, never imported.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi.errors import DCPMIConfigError

PAPER_GROUP = "dcpmi"
# Task tag -> kind.
KINDS: dict[str, str] = {"dcpmi_mcqa": "mcqa", "dcpmi_classification": "classification"}

# Groups whose tasks are variants of one task (the paper's robustness studies): group ->
# what varies over its tasks. Reports read the members from a run's ``group_subtasks``.
STUDIES: dict[str, str] = {
    "dcpmi_sst2_templates": "SST-2, 15 prompt templates (paper, Table 3)",
    "dcpmi_sst2_4shot": "SST-2, four-shot, 5 sets of examples (paper, Table 4)",
}


class _PlainLoader(yaml.SafeLoader):
    """A YAML loader that reads lm-eval's ``!function`` (any ``!tag``) as plain data and
    never imports what it names."""


def _untagged(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)


_PlainLoader.add_multi_constructor("!", _untagged)


def load_yaml(path: Path) -> dict[str, Any]:
    """A task or group YAML as plain data (``!function`` names kept as strings)."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_PlainLoader)
    except (OSError, yaml.YAMLError) as error:
        raise DCPMIConfigError(f"{path}: cannot be read as YAML ({error})") from None
    if not isinstance(data, dict):
        raise DCPMIConfigError(f"{path}: expected a YAML mapping, got {type(data).__name__}")
    return data


def _task_kinds(folder: Path) -> dict[str, str]:
    """``task -> kind`` for every task YAML under ``folder`` tagged with a ``KINDS`` tag."""
    kinds: dict[str, str] = {}
    for path in sorted(folder.rglob("*.yaml")):
        data = load_yaml(path)
        tags = data.get("tag") or []
        tags = [tags] if isinstance(tags, str) else tags
        found = [KINDS[tag] for tag in tags if tag in KINDS]
        if isinstance(data.get("task"), str) and found:
            kinds[data["task"]] = found[0]
    return kinds


@functools.lru_cache(maxsize=1)
def _paper_tasks(folder: Path) -> tuple[tuple[str, str], ...]:
    group_file = folder / f"{PAPER_GROUP}.yaml"
    order = load_yaml(group_file).get("task")
    if not isinstance(order, list) or not all(isinstance(t, str) for t in order):
        raise DCPMIConfigError(f"{group_file}: 'task' must be a list of task names")
    kinds = _task_kinds(folder)
    untagged = [task for task in order if task not in kinds]
    if untagged:
        raise DCPMIConfigError(
            f"{group_file}: no task YAML under {folder} defines {', '.join(untagged)} with "
            f"a tag among {', '.join(KINDS)}; add `tag: [dcpmi_mcqa]` or "
            "`tag: [dcpmi_classification]` to its YAML"
        )
    return tuple((task, kinds[task]) for task in order)


def paper_tasks() -> dict[str, str]:
    """The paper's tasks in the paper's order, each mapped to ``"mcqa"`` or
    ``"classification"``. Read once from the YAMLs (cached)."""
    return dict(_paper_tasks(task_configs_dir()))


def paper_order() -> tuple[str, ...]:
    """The paper's task names, in the paper's order (Table 2)."""
    return tuple(paper_tasks())


def tasks_of_kind(kind: str) -> tuple[str, ...]:
    """The paper's tasks of one kind (``"mcqa"`` or ``"classification"``), in order."""
    if kind not in KINDS.values():
        raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS.values())}")
    return tuple(task for task, its in paper_tasks().items() if its == kind)


def study_members(group: str, group_subtasks: Mapping[str, Any]) -> list[str]:
    """The leaf tasks of ``group`` in a results file's ``group_subtasks`` (nested groups
    flattened, each task once, in the file's order)."""
    seen: set[str] = set()

    def leaves(name: str) -> list[str]:
        found: list[str] = []
        for child in group_subtasks.get(name) or []:
            if child in seen:
                continue
            seen.add(child)
            found += leaves(child) if child in group_subtasks else [child]
        return found

    return leaves(group)
