"""lm-eval's task index: a registered task's YAML and config without building the task,
and the ``TaskManager`` patch that makes every manager index the plugin's task folders.

lm-eval offers no public way to read a registered task's config without building the
task, which downloads its dataset. ``base_task:`` (``task/_derive.py``) and the leaderboard's
installed-task check need exactly that, so they read the ``Entry`` objects of the public
``TaskManager.task_index`` and load their YAML with lm-eval's own loader
(``lm_eval/tasks/_index.py``, ``_yaml_loader.py``, ``_factory.py``; the same in 0.4.12
and 0.4.13). tests/test_derive.py fails first when these change.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def task_index(manager: Any) -> Mapping[str, Any]:
    """``manager``'s index: task, group and tag name -> ``lm_eval.tasks._index.Entry``.

    0.4: the public property ``TaskManager.task_index`` (``lm_eval/tasks/manager.py``).
    0.5.0.dev1: renamed ``TaskManager._task_index`` (same file).
    """
    index = getattr(manager, "task_index", None)
    return manager._task_index if index is None else index


def entry_yaml(manager: Any, name: str) -> Path | None:
    """The YAML file of the index entry ``name`` (None for a tag or an unknown name).

    ``TaskManager.task_index`` is public; its values are ``lm_eval.tasks._index.Entry``
    dataclasses, whose ``yaml_path`` field is read here.
    """
    entry = task_index(manager).get(name)
    return None if entry is None else entry.yaml_path


def indexed_entry(manager: Any, name: str) -> tuple[str, Mapping[str, Any]] | None:
    """What ``manager``'s index holds under ``name``, without building it: its kind
    (``"task"``, ``"python task"`` for one with ``class:``, ``"group"``, ``"tag"``) and its
    raw config (``Entry.cfg``: includes merged, ``!function`` tags unresolved; empty for a
    tag); None when the index has no such name (lm-eval would then try ``name`` as a
    path: ``TaskManager._load_spec``).
    """
    entry = task_index(manager).get(name)
    if entry is None:
        return None
    kind = getattr(entry.kind, "name", str(entry.kind)).lower().replace("py_task", "python task")
    return kind, entry.cfg if isinstance(entry.cfg, Mapping) else {}


def indexed_files_with(manager: Any, key: str) -> list[str]:
    """The YAML files in ``manager``'s index whose raw config has ``key``, as lm-eval
    names them in a task's ``metadata.config_source``.

    ``Entry.cfg`` is the YAML as ``TaskIndex.process_cfg`` (``lm_eval/tasks/_index.py``)
    read it: includes merged, ``!function`` tags unresolved.
    """
    return [
        str(entry.yaml_path)
        for entry in task_index(manager).values()
        if isinstance(entry.cfg, Mapping) and key in entry.cfg and entry.yaml_path is not None
    ]


def group_cycle(manager: Any, name: str, path: tuple[str, ...] = ()) -> list[str] | None:
    """A group that holds itself, through its ``task:`` list (directly or through other
    groups): the names around the cycle, ``[g, ..., g]``; None when ``name`` holds none.
    Read from the index entries' raw configs (``Entry.cfg``), as lm-eval's factory would
    follow them into an endless recursion (``TaskFactory._build_group_members``)."""
    if name in path:
        return [*path[path.index(name) :], name]
    entry = task_index(manager).get(name)
    config = getattr(entry, "cfg", None)
    if not isinstance(config, Mapping) or "group" not in config:
        return None
    return _members_cycle(manager, config.get("task"), (*path, name))


def _members_cycle(manager: Any, members: Any, path: tuple[str, ...]) -> list[str] | None:
    """``group_cycle`` through a group's ``task:`` list: names, ``{task: name, ...}``, and
    ``{group: name, ...}``, which lm-eval builds as the registered group of that name, or
    else as an inline group of the members it lists (``_build_group_members``)."""
    for member in members if isinstance(members, list) else [members]:
        if not isinstance(member, Mapping):
            child: Any = member
        elif isinstance(member.get("group"), str) and member["group"] in task_index(manager):
            child = member["group"]
        elif "group" in member:
            found = _members_cycle(manager, member.get("task"), path)
            if found:
                return found
            continue
        else:
            child = member.get("task")
        if isinstance(child, str):
            found = group_cycle(manager, child, path)
            if found:
                return found
    return None


def load_task_config(yaml_path: Path) -> dict[str, Any]:
    """A task's full config from its YAML file, as lm-eval builds it before the task.

    Mirrors the first branch of ``TaskFactory._load_full_config`` (``_factory.py``,
    ``deepcopy(load_yaml(entry.yaml_path, resolve_func=True))``), without the overrides
    and metadata it adds afterwards: includes merged, ``!function`` tags resolved to the
    very functions lm-eval's own tasks use.
    """
    from lm_eval.tasks._yaml_loader import load_yaml

    return copy.deepcopy(load_yaml(yaml_path, resolve_func=True))


def wrap_task_manager_init(
    task_manager: type,
    include_path: Callable[[Any], list],
    after_init: Callable[[Any], None],
    enabled: Callable[[], bool],
    on_fault: Callable[[Exception], None],
) -> None:
    """Wrap ``task_manager.__init__`` (once): while ``enabled()``, its ``include_path``
    argument (None, a path or a list) becomes ``include_path(given)``, and
    ``after_init(manager)`` runs on every new manager.

    A fault there builds the manager again from the caller's own arguments, as lm-eval
    would without the plugin, then calls ``on_fault(error)`` (which may raise it); when
    lm-eval fails on the caller's own arguments too, that error is lm-eval's and passes on.

    0.4: ``TaskManager.__init__(self, verbosity=None, include_path=None, ...)``
    (``lm_eval/tasks/manager.py``); the argument is bound by name, wherever it is given.
    """
    original = task_manager.__init__
    if getattr(original, "_dcpmi_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if not enabled():
            return original(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # arguments lm-eval refuses: its own error, as without the plugin
            return original(self, *args, **kwargs)
        bound.apply_defaults()
        try:
            bound.arguments["include_path"] = include_path(bound.arguments.get("include_path"))
            original(*bound.args, **bound.kwargs)
            after_init(self)
        except Exception as error:
            original(self, *args, **kwargs)
            on_fault(error)

    __init__._dcpmi_patched = True  # type: ignore[attr-defined]
    task_manager.__init__ = __init__


class UnknownTask(ValueError):
    """Task names that lm-eval's index does not know: ``names``, in lm-eval's own words."""

    def __init__(self, message: str, names: list[str]) -> None:
        super().__init__(message)
        self.names = names


def not_found(error: ValueError) -> UnknownTask | None:
    """lm-eval 0.4's ``ValueError("Tasks not found: a, b")`` (``EvaluatorConfig.process_tasks``,
    ``lm_eval/config/evaluate_config.py``) as ``UnknownTask``; None for another error."""
    _, found, names = str(error).partition("Tasks not found: ")
    if not found:
        return None
    return UnknownTask(str(error), [name.strip() for name in names.split(",") if name.strip()])


def load_tasks(manager: Any, specs: Any) -> dict[str, Any]:
    """``manager.load(specs)["tasks"]``, keyed by each task's own name; a name the index
    does not know raises ``UnknownTask``.

    0.4: ``process_tasks`` has refused such a name already (``not_found``), and the keys are
    the tasks' names. 0.5.0.dev1: ``TaskManager.match_tasks`` (``lm_eval/tasks/manager.py``)
    keeps a name that matches nothing, so ``TaskManager._load_spec`` raises
    ``KeyError("Spec '...' is not a registered task/group/tag name or valid YAML path")``;
    a group's members are keyed ``group::task``.
    """
    try:
        loaded = manager.load(specs)["tasks"]
    except KeyError as error:
        message = error.args[0] if error.args else ""
        if isinstance(message, str) and "is not a registered task" in message:
            name = re.search(r"Spec '(.+?)'", message)
            raise UnknownTask(message, [name.group(1)] if name else []) from None
        raise
    return {key.rsplit("::", 1)[-1]: task for key, task in loaded.items()}
