"""What the plugin needs from lm-eval beyond its public API, and what differs between the
supported lm-eval versions (0.4.12, 0.4.13): one place to adapt when lm-eval changes.

* Task loading (``core/derive.py``): lm-eval offers no public way to read a registered task's
  config without building the task, which downloads its dataset. ``base_task:`` needs
  exactly that, so it reads the ``Entry`` objects of the public ``TaskManager.task_index``
  and loads their YAML with lm-eval's own loader (``lm_eval/tasks/_index.py``,
  ``_yaml_loader.py``, ``_factory.py``; the same in 0.4.12 and 0.4.13).
* ``resolve_max_length`` (``core/tokens.py``): public in 0.4.13's ``lm_eval.models.utils``,
  absent from 0.4.12, whose ``HFLM.max_length`` does the same inline.

tests/test_derive.py and tests/test_dcpmi_task.py fail first when these change.
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


def resolve_max_length(config: Any, tokenizer: Any) -> int:
    """A model's context length from its config, else its tokenizer, else 2048: lm-eval's
    ``lm_eval.models.utils.resolve_max_length`` (0.4.13), or in 0.4.12 the same steps of
    ``HFLM.max_length`` (``lm_eval/models/huggingface.py``), which does not look at a
    composite config's ``text_config``."""
    try:
        from lm_eval.models.utils import resolve_max_length as lm_evals
    except ImportError:  # lm-eval 0.4.12
        for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
            if hasattr(config, attr):
                return int(getattr(config, attr))
        length = getattr(tokenizer, "model_max_length", None)
        unset = length is None or length == 1000000000000000019884624838656  # "infinity"
        return 2048 if unset else int(length)
    return int(lm_evals(config, tokenizer))
