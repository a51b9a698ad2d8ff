"""The per-document metrics recomputed from logged loglikelihoods, for the tests.

Written apart from ``lm_eval_dcpmi.rules._scoring`` on purpose: a test that checks logged metrics
against the code that logged them cannot catch a bug in that code. Plain Python, the
paper's rules read off the spec: the highest score wins, a tie goes to the lowest option
index, and NaN or -inf is no score (a method left with none counts the document wrong and
the document as ``unranked``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def pick(scores: Sequence[float]) -> int | None:
    """Index of the highest finite-or-+inf score, the lowest index on a tie; None if none."""
    candidates = [i for i, s in enumerate(scores) if not math.isnan(s) and s != -math.inf]
    if not candidates:
        return None
    top = max(scores[i] for i in candidates)
    return min(i for i in candidates if scores[i] == top)


def expected_metrics(
    conditional: Sequence[float],
    domain: Sequence[float],
    gold: int,
    n_tokens: Sequence[int],
    n_chars: Sequence[int],
) -> dict[str, float]:
    """1.0/0.0 per accuracy and the ``unranked`` flag, as a DC-PMI task logs them.

    ``conditional[i]``/``domain[i]``: option i's loglikelihood after the premise and after
    the domain premise; ``n_tokens``/``n_chars``: the option's tokens in the conditional
    request and its characters, as the calling test counts them.
    """
    assert len(conditional) == len(domain) == len(n_tokens) == len(n_chars) > 0
    scores = {
        "acc": list(conditional),
        "acc_avg": [c / t for c, t in zip(conditional, n_tokens, strict=True)],
        "acc_norm": [c / n for c, n in zip(conditional, n_chars, strict=True)],
        "acc_unc": list(domain),
        "acc_dcpmi": [c - d for c, d in zip(conditional, domain, strict=True)],
    }
    picks = {metric: pick(values) for metric, values in scores.items()}
    return {
        **{metric: float(p is not None and p == gold) for metric, p in picks.items()},
        "unranked": float(any(p is None for p in picks.values())),
    }


def expected_pma(log_probs: Sequence[float]) -> float:
    """Wiegreffe et al.'s probability mass on the options: the plain sum of exp(ll)."""
    return sum(math.exp(x) for x in log_probs)


def _probabilities(log_probs: Sequence[float]) -> list[float] | None:
    """exp(x - max) / sum over the options; None without a finite score."""
    if any(math.isnan(x) or x == math.inf for x in log_probs):
        return None
    finite = [x for x in log_probs if x != -math.inf]
    if not finite:
        return None
    shift = max(finite)
    raw = [math.exp(x - shift) if x != -math.inf else 0.0 for x in log_probs]
    return [r / sum(raw) for r in raw]


def expected_cc(
    conditional: Sequence[float], content_free: dict[str, Sequence[float]], gold: int
) -> float:
    """Contextual calibration (Zhao et al. 2021) read off the paper: p_cf(y_i) is the mean
    over the content-free inputs of p(y_i | input) normalised over the options, normalised
    again; pick argmax_i p(y_i | x) / p_cf(y_i)."""
    per_input = [_probabilities(values) for values in content_free.values()]
    p = _probabilities(conditional)
    if p is None or any(q is None for q in per_input):
        return 0.0
    mean = [sum(q[i] for q in per_input) / len(per_input) for i in range(len(conditional))]
    prior = [m / sum(mean) for m in mean]
    ratios = []
    for x, q in zip(p, prior, strict=True):
        if x == 0:
            ratios.append(-math.inf)  # no score
        elif q == 0:
            ratios.append(math.inf)  # never without the premise: the strongest evidence
        else:
            ratios.append(x / q)
    choice = pick(ratios)
    return float(choice is not None and choice == gold)


def expected_bc(documents: Sequence[tuple[Sequence[float], int]]) -> list[float]:
    """Batch calibration (Zhou et al. 2024): p_mean(y_i) is the mean of the documents'
    p(y_i | x) normalised over the options; pick argmax_i p(y_i | x) / p_mean(y_i). A
    document without a finite score is left out of the mean and counts wrong."""
    probabilities = [_probabilities(conditional) for conditional, _gold in documents]
    kept = [p for p in probabilities if p is not None]
    if not kept:
        return [0.0] * len(documents)
    n = len(kept[0])
    mean = [sum(p[i] for p in kept) / len(kept) for i in range(n)]
    result = []
    for p, (_conditional, gold) in zip(probabilities, documents, strict=True):
        if p is None:
            result.append(0.0)
            continue
        ratios = [p[i] / mean[i] if p[i] > 0 else -math.inf for i in range(n)]
        choice = pick(ratios)
        result.append(float(choice is not None and choice == gold))
    return result
