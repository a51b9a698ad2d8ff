"""Run at every Python start-up by ``lm_eval_dcpmi_autoload.pth``: wait for lm-eval.

lm-eval 0.4.x reads no plugin entry points (the package declares the ``lm_eval.tasks`` and
``lm_eval.models`` ones all the same, for the lm-eval that will), so the wheel ships a
``.pth`` file that imports this module. It must cost next to nothing in the many programs
that never import lm-eval: it imports nothing (``os`` and ``sys`` are loaded before any
``.pth`` runs) and only puts a finder on ``sys.meta_path`` that does a dict look-up per
import. When one of the lm-eval modules below is imported, ``lm_eval_dcpmi._autoload`` is
imported and its hook of that name is called with the module.

``LM_EVAL_DCPMI_AUTOLOAD=0`` switches it off: then nothing else is imported or installed.
``install`` does the work on demand (``dcpmi run`` calls it, switch or no switch). The
dependency is one-way: ``_autoload`` never imports this module.
"""

import os
import sys

SWITCH = "LM_EVAL_DCPMI_AUTOLOAD"

# lm-eval module -> function of lm_eval_dcpmi._autoload called with it. `before_exec`:
# called when the module is found, before it runs (`python -m lm_eval` runs
# lm_eval.__main__ through runpy, which finds the module but does not use its loader).
HOOKS = {
    "lm_eval.tasks.manager": ("patch_task_manager", False),
    "lm_eval.models": ("register_models", False),
    "lm_eval.evaluator": ("patch_evaluator", False),
    "lm_eval.__main__": ("on_lm_eval_cli", True),
}


# The plugin itself failed to import: said once, then lm-eval runs without it.
_unimportable = False


def _run_hook(name: str, module: object) -> None:
    """Run the hook; a fault never breaks lm-eval's own import (``_autoload.run_hook``
    warns once, then lm-eval runs as if the plugin were absent)."""
    global _unimportable
    hook = HOOKS[name][0]
    what = f"its start-up hook {hook}({name})"
    if _unimportable:
        return
    try:
        from lm_eval_dcpmi import _autoload
    except Exception as error:
        _unimportable = True
        import warnings

        warnings.warn(
            f"lm-eval-dcpmi: {what} failed ({error!r}); lm_eval goes on without the "
            "plugin's tasks and models. `dcpmi run` shows the error; "
            f"{SWITCH}=0 switches the hook off.",
            stacklevel=2,
        )
        return
    _autoload.run_hook(hook, module, what)


class LmEvalWatcher:
    """A ``sys.meta_path`` finder that finds nothing itself: it asks the finders after it
    for a watched module and wraps the loader so that the hook runs once the module has."""

    def find_spec(self, name, path=None, target=None):
        if name not in HOOKS:
            return None
        spec = None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(name, path, target) if find_spec is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        if HOOKS[name][1]:
            _run_hook(name, None)
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_hook(module):
            exec_module(module)
            _run_hook(name, module)

        spec.loader.exec_module = exec_then_hook
        return spec


def watch() -> None:
    """Put the watcher first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, LmEvalWatcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, LmEvalWatcher())


def install() -> None:
    """Register the plugin's tasks and models in this process even when the start-up hook
    is off or absent (``dcpmi run`` calls it): watch lm-eval's imports, and patch the
    modules already imported. Idempotent."""
    from lm_eval_dcpmi import _autoload

    _autoload.fail_loudly()
    watch()
    for name, (hook, before_exec) in HOOKS.items():
        if not before_exec and name in sys.modules:
            getattr(_autoload, hook)(sys.modules[name])


if os.environ.get(SWITCH, "1") != "0":
    watch()
