"""Make ``lm_eval --tasks dcpmi_copa`` work after a plain ``pip install``.

lm-eval 0.4.x finds tasks only in its own folder and in ``--include_path`` and reads no
plugin entry points yet. The wheel therefore ships ``lm_eval_dcpmi_autoload.pth``, which
Python runs at start-up; it imports the tiny top-level ``lm_eval_dcpmi_autoload``, which
imports this module only once lm-eval imports one of the modules it watches, and then
calls the hook of that name here (this module never imports that one back):

* ``patch_task_manager``: every ``TaskManager`` also indexes the plugin's ``task_configs``
  (first, so a user's ``--include_path`` can still override our tasks) and the folders of
  ``extra_task_folders``, and tells ``derive`` which derived YAMLs it indexed;
* ``register_models``: the optional ``hf-prefix`` model backend, by name, lazily;
* ``on_lm_eval_cli``: under lm-eval's command line only, a ``DCPMIError`` ends the
  program as one message (``errors.install_excepthook``).

Only public lm-eval names are used: ``TaskManager.__init__`` and its ``include_path``,
``lm_eval.api.registry.model_registry``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType


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


def patch_task_manager(module: ModuleType) -> None:
    """Wrap ``TaskManager.__init__``: the plugin's tasks and the extra folders are always
    indexed, and ``derive`` learns which derived YAMLs the new manager indexed."""
    task_manager = module.TaskManager
    original = task_manager.__init__
    if getattr(original, "_dcpmi_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        include = with_plugin_path(bound.arguments.get("include_path"))
        bound.arguments["include_path"] = [*include, *_extra_task_folders]
        original(*bound.args, **bound.kwargs)
        from lm_eval_dcpmi.core.derive import note_task_manager

        note_task_manager(self)

    __init__._dcpmi_patched = True  # type: ignore[attr-defined]
    task_manager.__init__ = __init__


def register_models(_models: ModuleType) -> None:
    """Register the plugin's model backends by name, without importing them yet."""
    from lm_eval.api.registry import model_registry

    if "hf-prefix" not in model_registry:
        model_registry.register("hf-prefix", target="lm_eval_dcpmi.hf_prefix.lm:PrefixHFLM")


def on_lm_eval_cli(_main: ModuleType | None) -> None:
    """lm-eval's command line is starting: end it on a ``DCPMIError`` with one message."""
    from lm_eval_dcpmi.errors import install_excepthook

    install_excepthook()
