"""Make ``lm_eval --tasks dcpmi_copa`` work after a plain ``pip install``.

lm-eval 0.4.x finds tasks only in its own folder and in ``--include_path``; it has
no plugin entry point yet. The wheel therefore ships ``lm_eval_dcpmi_autoload.pth``,
which Python runs at start-up and which imports this module. We install an import
hook that waits for lm-eval's own modules and then:

* adds the plugin's ``task_configs`` folder to every ``TaskManager`` (first, so a
  user's ``--include_path`` can still override our tasks);
* registers the optional ``hf-prefix`` model backend, lazily.

Nothing of lm-eval is imported here: processes that never import lm-eval pay for
one small module. Set ``LM_EVAL_DCPMI_AUTOLOAD=0`` to switch the hook off.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.abc
import importlib.machinery
import inspect
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

_TASK_MANAGER_MODULE = "lm_eval.tasks.manager"
_MODELS_MODULE = "lm_eval.models"  # registers lm-eval's own models on import


def with_plugin_path(include_path: object) -> list:
    """``include_path`` (None, a path, or a list of paths) with our task folder first."""
    from lm_eval_dcpmi import task_configs_dir

    ours = task_configs_dir()
    if include_path is None:
        given: list = []
    elif isinstance(include_path, (list, tuple)):
        given = list(include_path)
    else:
        given = [include_path]
    resolved = {Path(p).resolve() for p in given}
    return given if ours.resolve() in resolved else [ours, *given]


# Folders of generated task YAMLs (`dcpmi run --dcpmi_task`) that every TaskManager built
# meanwhile indexes after all others: lm-eval's --include_path takes one folder only.
_extra_task_folders: list[Path] = []


@contextlib.contextmanager
def extra_task_folders(folders: Sequence[str | Path]) -> Iterator[None]:
    """Within the block, every new ``TaskManager`` also indexes ``folders`` (last: they win)."""
    added = [Path(folder) for folder in folders]
    _extra_task_folders.extend(added)
    try:
        yield
    finally:
        for folder in added:
            _extra_task_folders.remove(folder)


# The TaskManager that is loading tasks right now (set around its `_load_spec`), else the
# one constructed last: `derive.with_base_task` looks a `base_task` up in its index, so
# that a base task from the user's --include_path is found.
_loading_task_manager: contextvars.ContextVar = contextvars.ContextVar(
    "dcpmi_loading_task_manager", default=None
)
_last_task_manager: weakref.ref | None = None


def current_task_manager() -> object | None:
    """The ``TaskManager`` loading tasks now, else the last one constructed, else None."""
    loading = _loading_task_manager.get()
    if loading is not None:
        return loading
    return _last_task_manager() if _last_task_manager is not None else None


def patch_task_manager(module: ModuleType) -> None:
    """Wrap ``TaskManager.__init__`` so that it always indexes the plugin's tasks, and
    remember which manager loads tasks (see ``current_task_manager``)."""
    task_manager = module.TaskManager
    original = task_manager.__init__
    if getattr(original, "_dcpmi_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        global _last_task_manager
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        include = with_plugin_path(bound.arguments.get("include_path"))
        bound.arguments["include_path"] = [*include, *_extra_task_folders]
        original(*bound.args, **bound.kwargs)
        _last_task_manager = weakref.ref(self)

    __init__._dcpmi_patched = True
    task_manager.__init__ = __init__

    load_spec = getattr(task_manager, "_load_spec", None)  # private: absent -> last one built
    if load_spec is not None:

        @functools.wraps(load_spec)
        def _load_spec(self, *args, **kwargs):
            token = _loading_task_manager.set(self)
            try:
                return load_spec(self, *args, **kwargs)
            finally:
                _loading_task_manager.reset(token)

        task_manager._load_spec = _load_spec


def register_models(_models: ModuleType) -> None:
    """Register the plugin's model backends by name, without importing them yet."""
    from lm_eval.api.registry import model_registry

    if "hf-prefix" not in model_registry:
        model_registry.register("hf-prefix", target="lm_eval_dcpmi.prefix_lm:PrefixHFLM")


_HOOKS: dict[str, Callable[[ModuleType], None]] = {
    _TASK_MANAGER_MODULE: patch_task_manager,
    _MODELS_MODULE: register_models,
}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook right after one of the watched modules has executed."""

    def find_spec(self, fullname, path, target=None):
        hook = _HOOKS.get(fullname)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_then_hook(module: ModuleType) -> None:
            exec_module(module)
            hook(module)

        spec.loader.exec_module = exec_then_hook
        return spec


def install() -> None:
    """Install the hook (idempotent); patch modules that are already imported."""
    from lm_eval_dcpmi.errors import install_excepthook

    install_excepthook()  # the plugin's errors end an lm_eval run as one message
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
    for name, hook in _HOOKS.items():
        if name in sys.modules:
            hook(sys.modules[name])


if os.environ.get("LM_EVAL_DCPMI_AUTOLOAD", "1") != "0":
    install()
