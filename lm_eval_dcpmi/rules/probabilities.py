"""Probabilities from log-probabilities, for the scoring rules (``scoring``): over the
options renormalised, averaged over content-free inputs, and summed (the options' mass).
Plain math, no import of the rest of the plugin."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def renormalised(log_probs: Sequence[float]) -> list[float]:
    """Probabilities over the options (softmax), computed stably; every entry NaN when no
    option has a finite log-probability (nothing to normalise by).

    >>> [round(p, 4) for p in renormalised([math.log(0.2), math.log(0.6)])]
    [0.25, 0.75]
    """
    finite = [x for x in log_probs if not math.isnan(x) and x != -math.inf]
    if not finite or any(math.isnan(x) or x == math.inf for x in log_probs):
        return [math.nan] * len(log_probs)
    top = max(finite)
    weights = [0.0 if x == -math.inf else math.exp(x - top) for x in log_probs]
    total = sum(weights)
    return [w / total for w in weights]


def content_free_prior(content_free: Mapping[str, Sequence[float]]) -> list[float]:
    """Zhao et al.'s p_cf(y_i): each content-free input's option probabilities renormalised
    over the options, averaged over the inputs in probability space, renormalised again."""
    per_input = [renormalised(values) for values in content_free.values()]
    mean = [sum(column) / len(per_input) for column in zip(*per_input, strict=True)]
    total = sum(mean)
    return [p / total for p in mean] if total > 0 else [math.nan] * len(mean)


def option_mass(log_probs: Sequence[float]) -> float:
    """sum_i P(y_i): the probability mass on the options, from their log-probabilities by
    log-sum-exp (options of probability near 0 add their share instead of underflowing one
    by one); 0.0 when every option is impossible (-inf), NaN when any is NaN.

    >>> round(option_mass([math.log(0.2), math.log(0.3), -math.inf]), 12)
    0.5
    """
    if any(math.isnan(x) for x in log_probs):
        return math.nan
    finite = [x for x in log_probs if x != -math.inf]
    if not finite:
        return 0.0
    top = max(finite)
    if top == math.inf:
        return math.nan  # no log-probability is +inf: not a model's number
    return math.exp(top + math.log(math.fsum(math.exp(x - top) for x in finite)))


def log_of(p: float) -> float:
    """log p; -inf for 0, NaN for NaN."""
    return math.nan if math.isnan(p) else (-math.inf if p == 0 else math.log(p))
