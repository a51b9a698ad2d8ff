"""The per-document metrics recomputed from logged loglikelihoods, for the tests.

Written apart from ``lm_eval_dcpmi.core.scoring`` on purpose: a test that checks logged metrics
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
