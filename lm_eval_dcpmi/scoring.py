"""The decision rules of the DC-PMI paper (and lm-eval's acc_norm), as pure functions.

Every metric name the plugin reports is defined here; reports and tests import them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Accuracy metric -> the method's name in reports, in the reports' column order.
METHODS: dict[str, str] = {
    "acc_unc": "Unc",  # log P(y | domain premise)
    "acc": "LM",  # log P(y | premise)
    "acc_avg": "Avg",  # log P(y | premise) / tokens of y
    "acc_norm": "Char",  # log P(y | premise) / characters of y (lm-eval's acc_norm)
    "acc_dcpmi": "DC-PMI",  # log P(y | premise) - log P(y | domain premise)
}
ACCURACIES = tuple(METHODS)
# Per-task counts (summed, not averaged): requests cut from the left to fit the
# model's window, and documents on which some method had no finite score to rank.
COUNTS = ("truncated", "unranked")


def _argmax(scores: Sequence[float]) -> int | None:
    """Index of the highest score; ties go to the lowest index (as in the spec).

    NaN and -inf are no score at all: they never win, and a list without any other
    score has no argmax (None) rather than a silent option 0.
    """
    best = None
    for i, score in enumerate(scores):
        if math.isnan(score) or score == -math.inf:
            continue
        if best is None or score > scores[best]:
            best = i
    return best


def _divided(scores: Sequence[float], sizes: Sequence[int] | None, what: str) -> list | None:
    if sizes is None:
        return None
    if len(sizes) != len(scores) or min(sizes) < 1:
        raise ValueError(f"every option needs a positive {what} count, got {list(sizes)}")
    return [score / size for score, size in zip(scores, sizes, strict=True)]


def predictions(
    conditional: Sequence[float],
    domain: Sequence[float],
    n_tokens: Sequence[int] | None = None,
    n_chars: Sequence[int] | None = None,
) -> dict[str, int | None]:
    """Predicted option index under each method (keys: ``ACCURACIES``).

    ``conditional[i]`` is log P(option_i | premise), ``domain[i]`` is
    log P(option_i | domain premise), ``n_tokens[i]`` the option's token count in the
    conditional request and ``n_chars[i]`` its length in characters. A method whose
    counts are not given, or that has no finite score for any option, predicts None.

    >>> predictions([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], [1, 2, 6], [4, 5, 30])
    {'acc_unc': 0, 'acc': 0, 'acc_avg': 2, 'acc_norm': 2, 'acc_dcpmi': 1}
    """
    if not conditional or len(conditional) != len(domain):
        raise ValueError(
            f"need one domain score per option: got {len(conditional)} conditional "
            f"and {len(domain)} domain scores"
        )
    average = _divided(conditional, n_tokens, "token")
    per_char = _divided(conditional, n_chars, "character")
    return {
        "acc_unc": _argmax(domain),
        "acc": _argmax(conditional),
        "acc_avg": None if average is None else _argmax(average),
        "acc_norm": None if per_char is None else _argmax(per_char),
        "acc_dcpmi": _argmax([c - d for c, d in zip(conditional, domain, strict=True)]),
    }


def accuracies(
    conditional: Sequence[float],
    domain: Sequence[float],
    gold: int,
    n_tokens: Sequence[int] | None = None,
    n_chars: Sequence[int] | None = None,
) -> dict[str, float]:
    """Per-document 1.0/0.0 correctness under each method, plus ``unranked``.

    A method that cannot rank the options (every score NaN or -inf) counts the
    document as wrong, never as a pick of option 0, and ``unranked`` is 1.0. A method
    whose counts are not given is NaN (unknown, not wrong).
    """
    predicted = predictions(conditional, domain, n_tokens, n_chars)
    missing = {"acc_avg": n_tokens is None, "acc_norm": n_chars is None}
    scores = {
        metric: float("nan") if missing.get(metric) else float(pred == gold)
        for metric, pred in predicted.items()
    }
    unranked = any(pred is None and not missing.get(m) for m, pred in predicted.items())
    return {**scores, "unranked": float(unranked)}
