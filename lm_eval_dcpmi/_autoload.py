"""Make ``lm_eval --tasks dcpmi_copa`` work after a plain ``pip install``.

lm-eval 0.4.x finds tasks only in its own folder and in ``--include_path`` and reads no
plugin entry points yet. The wheel therefore ships ``lm_eval_dcpmi_autoload.pth``, which
Python runs at start-up; it imports the tiny top-level ``lm_eval_dcpmi_autoload``, which
imports this module only once lm-eval imports one of the modules it watches, and then
calls the hook of that name here (this module never imports that one back):

* ``patch_task_manager``: every ``TaskManager`` also indexes the plugin's ``task_configs``
  (first, so a user's ``--include_path`` can still override our tasks) and the folders of
  ``extra_task_folders``, and tells ``derive`` which derived YAMLs it indexed;
* ``register_models``: the optional ``hf-prefix`` model backend, by name, lazily, where
  lm-eval reads no ``lm_eval.models`` entry points (every release so far);
* ``patch_evaluator``: before ``simple_evaluate`` builds the model, the embedded model's
  file is parsed once per process instead of six times when the model arguments name it
  (``embedded.parse_once``: ~13 s of every load), and with ``use_cache`` an answer cache
  recorded for another model is refused (``_harness._answer_cache``); lm-eval 0.5.0.dev1
  logs the true document ids under ``--samples``; a served model must return prompt
  log-probabilities for a DC-PMI task;
* ``on_lm_eval_cli``: under lm-eval's command line only, a ``DCPMIError`` ends the
  program as one message (``errors.install_excepthook``).

Nothing else: no module that is not lm-eval's is touched.

The hooks fail soft: a fault of the plugin's part (here, or in ``harness`` on an lm-eval it
does not know) warns once, and from then on lm-eval runs as if the plugin were absent; a
``TaskManager`` being built when it happens is built again from its caller's arguments.
``dcpmi run`` (``lm_eval_dcpmi_autoload.install``) wants the error itself: ``fail_loudly``.

What this touches of lm-eval (``TaskManager.__init__`` and its ``include_path``, the
model registry) goes through ``_harness._index`` and ``_harness._models``.
"""

from __future__ import annotations

import contextlib
import warnings
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


# The warning of the plugin's first fault in lm-eval; from then on the hooks do nothing.
_fault: str | None = None
# Set by `dcpmi run`: a fault raises instead (the run needs the plugin).
_loud = False


def plugin_fault(what: str, error: Exception) -> None:
    """The plugin's part in lm-eval failed: warn once and switch the hooks off (or, under
    ``fail_loudly``, raise ``error``)."""
    global _fault
    if _loud:
        raise error
    if _fault is not None:
        return
    _fault = (
        f"lm-eval-dcpmi: {what} failed ({error!r}); lm_eval goes on without the plugin's "
        "tasks and models. `dcpmi run` shows the error; LM_EVAL_DCPMI_AUTOLOAD=0 switches "
        "the hook off."
    )
    warnings.warn(_fault, stacklevel=2)


def plugin_on() -> bool:
    """False once a fault switched the hooks off."""
    return _loud or _fault is None


def fail_loudly() -> None:
    """From now on a fault of the hooks raises (``dcpmi run`` needs the plugin)."""
    global _loud
    _loud = True


def run_hook(hook: str, module: ModuleType | None, what: str) -> None:
    """Call this module's ``hook`` with ``module`` unless a fault switched the hooks off;
    a fault warns once (``plugin_fault``), never breaks lm-eval's own import."""
    if not plugin_on():
        return
    try:
        globals()[hook](module)
    except Exception as error:
        plugin_fault(what, error)


def patch_task_manager(module: ModuleType) -> None:
    """Wrap ``TaskManager.__init__``: the plugin's tasks and the extra folders are always
    indexed, and ``derive`` learns which derived YAMLs the new manager indexed."""
    from lm_eval_dcpmi._harness import wrap_task_manager_init

    wrap_task_manager_init(
        module.TaskManager,
        _include_path,
        _note_task_manager,
        enabled=plugin_on,
        on_fault=lambda error: plugin_fault("its TaskManager hook", error),
    )


def _include_path(given: object) -> list:
    return [*with_plugin_path(given), *_extra_task_folders]


def _note_task_manager(manager: object) -> None:
    from lm_eval_dcpmi.task import note_task_manager

    note_task_manager(manager)


# The plugin's model backends: name -> "module:Class", as pyproject.toml's `lm_eval.models`
# entry points declare them (tests/test_registration.py compares the two).
MODELS = {"hf-prefix": "lm_eval_dcpmi.hf_prefix:PrefixHFLM"}


def register_models(_models: ModuleType) -> None:
    """Register the plugin's model backends by name, without importing them yet; an lm-eval
    that reads the ``lm_eval.models`` entry points registers them itself."""
    from lm_eval_dcpmi._harness import reads_plugin_entry_points, register_model

    if reads_plugin_entry_points():
        return
    for name, target in MODELS.items():
        register_model(name, target=target)


def patch_evaluator(evaluator: ModuleType) -> None:
    """Before ``simple_evaluate`` builds a model: the embedded model's file is parsed once
    (``embedded.parse_once``), and with ``use_cache`` the answer cache must be this model's
    (``_harness._answer_cache``), in plain ``lm_eval`` and the Python API as in ``dcpmi
    run``. lm-eval 0.5.0.dev1's samples name their true documents under ``--samples``
    (``_harness._runs.true_doc_ids_in_logged_samples``). And a DC-PMI task scored through a
    served model first checks that the server returns prompt log-probabilities
    (``_harness._servers``). lm-eval has no hook of its own for any of them."""
    from lm_eval_dcpmi._harness import (
        before_simple_evaluate,
        check_servers_before_evaluate,
        true_doc_ids_in_logged_samples,
    )

    before_simple_evaluate(evaluator, _before_simple_evaluate, enabled=plugin_on)
    true_doc_ids_in_logged_samples(evaluator)
    check_servers_before_evaluate(evaluator, _is_dcpmi_task, enabled=plugin_on)


def _is_dcpmi_task(task: object) -> bool:
    from lm_eval_dcpmi.task import DCPMITask

    return isinstance(task, DCPMITask)


def _before_simple_evaluate(model: str, model_args: object, use_cache: object) -> None:
    from types import SimpleNamespace

    from lm_eval_dcpmi import embedded
    from lm_eval_dcpmi._harness import check_cache_owner, parse_model_args

    args = parse_model_args(model_args)
    if embedded.is_embedded_file(args.get("pretrained"), args.get("gguf_file")):
        embedded.parse_once()
    if use_cache:
        check_cache_owner(SimpleNamespace(use_cache=use_cache, model=model, model_args=model_args))


def on_lm_eval_cli(_main: ModuleType | None) -> None:
    """lm-eval's command line is starting: end it on a ``DCPMIError`` with one message."""
    from lm_eval_dcpmi.errors import install_excepthook

    install_excepthook()
