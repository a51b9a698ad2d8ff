"""What ``dcpmi run`` checks around lm-eval's run: where lm-eval caches requests, the class
that saves results and samples, and the dummy model's tokenizer."""

from __future__ import annotations

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
