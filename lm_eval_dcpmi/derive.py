"""DC-PMI on a task that is already registered, named by ``base_task``.

A derived task YAML names the base task instead of copying or including its file::

    task: arc_easy_dcpmi
    base_task: arc_easy
    class: !function lm_eval_dcpmi.task.DCPMITask
    domain_premise: "Answer:"

lm-eval 0.4.13 has no way to do this itself: ``include:`` takes a file path only, and a
group's ``{task: arc_easy, ...overrides}`` entry keeps the base task's name (so base
and variant cannot run side by side) and ignores ``class:``. ``DCPMITask`` therefore
calls ``with_base_task`` with its config, which starts from the base task's full config,
resolved as lm-eval resolves it, and lays the derived YAML's keys over it.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

from lm_eval_dcpmi.errors import DCPMIConfigError

BASE_TASK_KEY = "base_task"
# Keys that place the *base* task in groups and tags (or name it in tables): the
# derived task is a different task, so it does not inherit them.
BASE_KEYS_DROPPED = ("tag", "group", "task_list", "task_alias")


def with_base_task(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a task config with ``base_task``) laid over the base task's config.

    The base task is looked up in the index of the ``TaskManager`` that is loading the
    task (so tasks from ``--include_path`` count), else in a fresh ``TaskManager``.
    The derived config's keys win; ``metadata`` is merged (derived keys win, so
    ``config_source`` stays the derived YAML); the base's ``tag``, ``group``,
    ``task_list`` and ``task_alias`` are dropped. Raises ``DCPMIConfigError`` naming the
    derived YAML when the base is unknown, a group or tag, a Python task class, not
    multiple choice, or when no domain premise is given.
    """
    derived = dict(config)
    base_name = derived.pop(BASE_TASK_KEY)
    where = _describe(derived)
    if not isinstance(base_name, str) or not base_name:
        raise DCPMIConfigError(
            f"{where}: `{BASE_TASK_KEY}` must name a registered task, got {base_name!r}."
        )
    index, searched = _task_index()
    base = _base_config(base_name, index, searched, where)
    merged = {**base, **derived}
    merged["metadata"] = {
        **_as_dict(base.get("metadata")),
        **_as_dict(derived.get("metadata")),
        BASE_TASK_KEY: base_name,
    }
    _check_merged(merged, base_name, where)
    return merged


def _base_config(base_name: str, index: dict, searched: str, where: str) -> dict[str, Any]:
    """The base task's config as lm-eval builds it (includes and ``!function`` resolved)."""
    from lm_eval.tasks._index import Kind

    entry = index.get(base_name)
    if entry is None:
        close = difflib.get_close_matches(base_name, list(index), n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} is not a registered task ({searched}).{hint} "
            "A task of your own needs its folder in --include_path."
        )
    if entry.kind in (Kind.GROUP, Kind.TAG):
        kind = "group" if entry.kind is Kind.GROUP else "tag"
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} is a {kind}, not one task; derive each of its "
            f"tasks with its own `{BASE_TASK_KEY}` (and group them), or use a ready-made "
            "variant (e.g. `--tasks mmlu_dcpmi`, `--tasks dcpmi_lm_eval`)."
        )
    config = _load_config(entry)
    for key in BASE_KEYS_DROPPED:
        config.pop(key, None)
    base_class = config.pop("class", None)
    if base_class is not None and not _is_dcpmi_task(base_class):
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} is the Python task class "
            f"{getattr(base_class, '__qualname__', base_class)!r} ({entry.yaml_path}); DC-PMI "
            "can only be added to a YAML task (lm-eval's ConfigurableTask), whose prompt "
            "and options the config defines."
        )
    return config


def _check_merged(merged: dict[str, Any], base_name: str, where: str) -> None:
    output_type = merged.get("output_type")
    if output_type != "multiple_choice":
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} has `output_type: {output_type}`; DC-PMI scores "
            "the options of a `multiple_choice` task."
        )
    premise = merged.get("domain_premise")
    if not isinstance(premise, str) or not premise:
        raise DCPMIConfigError(
            f"{where}: DC-PMI needs a non-empty domain premise; add a line such as "
            f'`domain_premise: "Answer:"` (ending the way {base_name!r}\'s prompt ends).'
        )


def _task_index() -> tuple[dict, str]:
    """The index of the TaskManager loading tasks now (else a fresh one), and what it
    covers, for error messages."""
    from lm_eval_dcpmi._autoload import current_task_manager

    manager = current_task_manager()
    if manager is not None:
        include = getattr(manager, "include_path", None) or []
        folders = include if isinstance(include, (list, tuple)) else [include]
        return manager.task_index, "searched lm-eval's tasks and " + (
            ", ".join(str(folder) for folder in folders) or "no --include_path"
        )
    from lm_eval.tasks import TaskManager

    searched = (
        "searched lm-eval's tasks and the plugin's only: the loading TaskManager is unknown "
        "(plugin autoload hook off?), so --include_path folders were not searched"
    )
    return TaskManager().task_index, searched


def _load_config(entry: Any) -> dict[str, Any]:
    """As ``lm_eval.tasks._factory.TaskFactory._load_full_config``, without overrides."""
    from lm_eval.tasks._yaml_loader import load_yaml

    if entry.yaml_path is not None:
        return copy.deepcopy(load_yaml(entry.yaml_path, resolve_func=True))
    return copy.deepcopy(dict(entry.cfg or {}))


def _is_dcpmi_task(cls: Any) -> bool:
    """A base that is already a DC-PMI task (e.g. ``dcpmi_copa``) may be re-derived."""
    from lm_eval_dcpmi.task import DCPMITask  # here: task.py imports this module

    return isinstance(cls, type) and issubclass(cls, DCPMITask)


def _as_dict(metadata: Any) -> dict[str, Any]:
    # lm-eval keeps a non-dict `metadata:` under this key (TaskFactory._load_full_config).
    if metadata is None:
        return {}
    return dict(metadata) if isinstance(metadata, dict) else {"_metadata": metadata}


def _describe(config: dict[str, Any]) -> str:
    """``task NAME (path/to/derived.yaml)`` for error messages."""
    source = _as_dict(config.get("metadata")).get("config_source", "its YAML")
    return f"task {config.get('task', '<unnamed>')} ({source})"
