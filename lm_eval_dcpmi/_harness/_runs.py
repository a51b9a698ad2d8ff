"""What ``dcpmi run`` checks around lm-eval's run: where lm-eval caches requests, the class
that saves results and samples, the dummy model's tokenizer, and a check before every
``simple_evaluate`` (the answer cache's owner, in plain ``lm_eval`` too)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any


def request_cache_folder() -> Path:
    """The folder of ``--cache_requests`` (``lm_eval.caching.cache.PATH``, set from
    ``LM_HARNESS_CACHE_PATH``; the same in 0.4.12, 0.4.13 and 0.5.0.dev1)."""
    from lm_eval.caching import cache

    return Path(cache.PATH)


def evaluation_tracker_class() -> Any:
    """The class whose ``save_results_aggregated`` and ``save_results_samples`` write the
    results and samples files (``lm_eval.loggers.evaluation_tracker.EvaluationTracker``)."""
    from lm_eval.loggers import evaluation_tracker

    return evaluation_tracker.EvaluationTracker


def dummy_tokenizer_name() -> str | None:
    """The Hub tokenizer lm-eval's ``dummy`` model renders ``--apply_chat_template`` with."""
    from lm_eval.models.dummy import DummyLM

    return getattr(DummyLM, "tokenizer_name", None)


def before_simple_evaluate(
    evaluator: Any, before: Callable[[str, Any, Any], None], enabled: Callable[[], bool]
) -> None:
    """Wrap ``evaluator.simple_evaluate`` (once): while ``enabled()``, a call with a model
    named by a string first runs ``before(model, model_args, use_cache)``, before lm-eval
    builds the model.

    0.4 and 0.5.0.dev1: ``simple_evaluate(model, model_args=None, tasks=None, ...,
    use_cache=None, ...)`` (``lm_eval/evaluator.py``); lm-eval's command line calls it as
    ``from lm_eval import simple_evaluate`` (``_cli/run.py``), which the package resolves
    from the module at each call (``lm_eval/__init__.py``, ``__getattr__``).
    """
    original = evaluator.simple_evaluate
    if getattr(original, "_dcpmi_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def simple_evaluate(*args: Any, **kwargs: Any) -> Any:
        if enabled():
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:  # lm-eval's own error, as without the plugin
                return original(*args, **kwargs)
            given = bound.arguments
            if isinstance(given.get("model"), str):
                before(given["model"], given.get("model_args"), given.get("use_cache"))
        return original(*args, **kwargs)

    simple_evaluate._dcpmi_patched = True  # type: ignore[attr-defined]
    evaluator.simple_evaluate = simple_evaluate


def true_doc_ids_in_logged_samples(evaluator: Any) -> None:
    """lm-eval 0.5.0.dev1 logs wrong document ids under ``--samples`` (so ``--quick`` and
    ``--shard`` too): its ``Task.doc_iterator`` gives each chosen document its index in the
    split, and ``evaluator_utils._build_logged_samples`` then maps that index through the
    ``--samples`` list again (``indices[doc_id]``), an ``IndexError`` or another document's
    id. Wrapped here (once) to log the ids the instances carry, which are the true ones.
    0.4's evaluator has no ``_build_logged_samples`` (it logs ``indices[doc_id]`` of
    ids numbered 0, 1, ..., which is right): nothing to do.
    """
    original = getattr(evaluator, "_build_logged_samples", None)
    if original is None or getattr(original, "_dcpmi_patched", False):
        return

    @functools.wraps(original)
    def _build_logged_samples(task: Any, samples: Any, task_name: str) -> Any:
        return original(task, None, task_name)

    _build_logged_samples._dcpmi_patched = True  # type: ignore[attr-defined]
    evaluator._build_logged_samples = _build_logged_samples
