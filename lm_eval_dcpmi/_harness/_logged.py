"""The shape of what lm-eval logs per document (``--log_samples``), where releases differ."""

from __future__ import annotations

from typing import Any


def logged_loglikelihood(response: Any) -> Any:
    """The loglikelihood of one request's entry in a logged sample's ``filtered_resps``
    (JSONL files hold it as a string; the caller converts).

    0.4: ``[loglikelihood, is_greedy]`` (``lm_eval/evaluator.py``, the ``take_first``
    filter). 0.5.0.dev1: ``[[loglikelihood, is_greedy]]``, one pair per repeat.
    """
    first = response[0]
    if isinstance(first, (list, tuple)):  # lm-eval 0.5
        first = first[0]
    return first
