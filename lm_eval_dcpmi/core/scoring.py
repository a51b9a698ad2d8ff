"""The decision rules of the DC-PMI paper (and lm-eval's acc_norm), as pure functions.

Every metric the plugin reports is one row of ``METRICS``: its name, report label,
rule, aggregations and direction. lm-eval's registration and ``metric_list``
(``metrics``), the reports, the group YAMLs' ``aggregate_metric_list`` (kept equal by
tests/test_metric_table.py) and the generators in scripts/ all read that table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    """One per-document metric of a DC-PMI task."""

    name: str  # lm-eval's metric name (results show "<name>,none")
    label: str  # its column heading in reports
    kind: Literal["accuracy", "count"]  # accuracy: 1.0/0.0 per document; count: 0, 1, 2...
    rule: str  # what decides it: an accuracy's score (highest wins), a count's what
    aggregation: Literal["mean", "sum"]  # over a task's documents
    higher_is_better: bool
    # over a group's tasks (the group YAMLs); None: groups do not report it, since lm-eval
    # groups only average and an average of per-task counts means nothing
    group_aggregation: Literal["mean"] | None


def _accuracy(name: str, label: str, rule: str) -> Metric:
    # right (1.0) or wrong (0.0) per document: a task's mean, a group's mean of its tasks'
    return Metric(name, label, "accuracy", rule, "mean", True, "mean")


def _count(name: str, what: str) -> Metric:
    # a task's sum; no group score (see Metric.group_aggregation)
    return Metric(name, name, "count", what, "sum", False, None)


# In the reports' column order.
METRICS: tuple[Metric, ...] = (
    _accuracy("acc_unc", "Unc", "log P(y | domain premise)"),
    _accuracy("acc", "LM", "log P(y | premise)"),
    _accuracy("acc_avg", "Avg", "log P(y | premise) / tokens of y"),
    _accuracy("acc_norm", "Char", "log P(y | premise) / characters of y"),  # lm-eval's acc_norm
    _accuracy("acc_dcpmi", "DC-PMI", "log P(y | premise) - log P(y | domain premise)"),
    _count("truncated", "requests cut from the left to fit the model's window"),
    _count("unranked", "documents on which some method had no finite score to rank"),
)
METRIC_BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}

# Views of the table. Accuracy metric -> the method's name in reports, in column order:
METHODS: dict[str, str] = {m.name: m.label for m in METRICS if m.kind == "accuracy"}
ACCURACIES = tuple(METHODS)
# Per-task counts (summed, not averaged).
COUNTS = tuple(m.name for m in METRICS if m.kind == "count")
# What a group of DC-PMI tasks reports (``aggregate_metric_list``), in this order.
GROUP_METRICS = tuple(m.name for m in METRICS if m.group_aggregation is not None)


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
