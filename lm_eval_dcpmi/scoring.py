"""The four decision rules of the DC-PMI paper, as one pure function."""

from __future__ import annotations

from collections.abc import Sequence

METRICS = ("acc", "acc_avg", "acc_unc", "acc_dcpmi")


def _argmax(scores: Sequence[float]) -> int:
    # Ties go to the lowest index (strict >), as in the spec.
    best = 0
    for i, score in enumerate(scores):
        if score > scores[best]:
            best = i
    return best


def predictions(
    conditional: Sequence[float],
    domain: Sequence[float],
    n_tokens: Sequence[int] | None,
) -> dict[str, int | None]:
    """Predicted option index under each method.

    ``conditional[i]`` is log P(option_i | premise), ``domain[i]`` is
    log P(option_i | domain premise) and ``n_tokens[i]`` the option's token count
    in the conditional request. Without token counts the Avg prediction is None.

    >>> predictions([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], [1, 2, 6])
    {'acc': 0, 'acc_avg': 2, 'acc_unc': 0, 'acc_dcpmi': 1}
    """
    if not conditional or len(conditional) != len(domain):
        raise ValueError(
            f"need one domain score per option: got {len(conditional)} conditional "
            f"and {len(domain)} domain scores"
        )
    if n_tokens is not None:
        if len(n_tokens) != len(conditional) or min(n_tokens) < 1:
            raise ValueError(f"every option needs a positive token count, got {list(n_tokens)}")
        average = [c / n for c, n in zip(conditional, n_tokens, strict=True)]
    return {
        "acc": _argmax(conditional),
        "acc_avg": _argmax(average) if n_tokens is not None else None,
        "acc_unc": _argmax(domain),
        "acc_dcpmi": _argmax([c - d for c, d in zip(conditional, domain, strict=True)]),
    }


def accuracies(
    conditional: Sequence[float],
    domain: Sequence[float],
    n_tokens: Sequence[int] | None,
    gold: int,
) -> dict[str, float]:
    """Per-document 1.0/0.0 correctness under each method (NaN for Avg without token counts)."""
    return {
        metric: float("nan") if pred is None else float(pred == gold)
        for metric, pred in predictions(conditional, domain, n_tokens).items()
    }
