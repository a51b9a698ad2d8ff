"""Every use of lm-eval's non-public task-loading code, in one place.

lm-eval 0.4.12 and 0.4.13 (``lm_eval/tasks/_index.py``, ``_yaml_loader.py``,
``_factory.py``; identical in both) offer no public way to read a registered task's
config without building the task, which downloads its dataset. ``base_task:``
(``derive.py``) needs exactly that, so it reads the ``Entry`` objects of the public
``TaskManager.task_index`` and loads their YAML with lm-eval's own loader. When lm-eval
changes these, this module is the one to adapt (tests/test_derive.py fails first).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any


def entry_yaml(manager: Any, name: str) -> Path | None:
    """The YAML file of the index entry ``name`` (None for a tag or an unknown name).

    ``TaskManager.task_index`` is public; its values are ``lm_eval.tasks._index.Entry``
    dataclasses, whose ``yaml_path`` field is read here.
    """
    entry = manager.task_index.get(name)
    return None if entry is None else entry.yaml_path


def indexed_files_with(manager: Any, key: str) -> list[str]:
    """The YAML files in ``manager``'s index whose raw config has ``key``, as lm-eval
    names them in a task's ``metadata.config_source``.

    ``Entry.cfg`` is the YAML as ``TaskIndex.process_cfg`` (``_index.py``) read it:
    includes merged, ``!function`` tags unresolved.
    """
    return [
        str(entry.yaml_path)
        for entry in manager.task_index.values()
        if isinstance(entry.cfg, dict) and key in entry.cfg and entry.yaml_path is not None
    ]


def load_task_config(yaml_path: Path) -> dict[str, Any]:
    """A task's full config from its YAML file, as lm-eval builds it before the task.

    Mirrors the first branch of ``TaskFactory._load_full_config`` (``_factory.py``,
    ``deepcopy(load_yaml(entry.yaml_path, resolve_func=True))``), without the overrides
    and metadata it adds afterwards: includes merged, ``!function`` tags resolved to the
    very functions lm-eval's own tasks use.
    """
    from lm_eval.tasks._yaml_loader import load_yaml

    return copy.deepcopy(load_yaml(yaml_path, resolve_func=True))
