"""Intervals and paired tests on per-document correctness (1.0/0.0 per document).

* An accuracy's 95% interval is the **Wilson score interval** (good at small n and near
  0 or 1, unlike the normal approximation).
* DC-PMI against another method, on the same documents: the difference of accuracies
  with **Newcombe's hybrid score interval for paired proportions** (Newcombe 1998,
  method 10: Wilson intervals of both accuracies combined with their correlation), and
  **McNemar's exact test**: under "both methods equally good", each document that
  exactly one of them gets right is that method's with probability 1/2, so the two-sided
  binomial test of the discordant counts (``scipy.stats.binomtest``).
* A study's spread: mean and **sample** standard deviation (n - 1) over its tasks.

Documents where either value is NaN (a method that was not computed) are left out of a
pair. No correction for multiple comparisons is made (4 tests per task).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the normal distribution's 97.5% quantile
SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class Interval:
    value: float  # the accuracy (or difference), as a fraction
    low: float
    high: float
    n: int  # documents


@dataclass(frozen=True)
class PairCounts:
    """How two methods fare on the same documents."""

    both: int  # right under both
    first_only: int  # right under the first, wrong under the second
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither


@dataclass(frozen=True)
class Comparison:
    """``first`` minus ``second`` on the same documents."""

    first: str
    second: str
    difference: Interval  # accuracy of first minus accuracy of second, with its interval
    counts: PairCounts
    p_value: float  # McNemar's exact test, two-sided; NaN when scipy is missing

    @property
    def significant(self) -> bool:
        return self.p_value < SIGNIFICANCE


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``successes / n``; (NaN, NaN) for n = 0."""
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def accuracy_interval(values: Sequence[float]) -> Interval | None:
    """Accuracy and Wilson interval of per-document 1.0/0.0 values; None when none is a
    number."""
    known = [v for v in values if not math.isnan(v)]
    if not known:
        return None
    right = int(sum(known))
    low, high = wilson(right, len(known))
    return Interval(right / len(known), low, high, len(known))


def pair_counts(first: Sequence[float], second: Sequence[float]) -> PairCounts:
    """The 2x2 table of two methods' per-document values (NaN pairs left out)."""
    if len(first) != len(second):
        raise ValueError(f"paired values need the same documents: {len(first)} != {len(second)}")
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for a, b in zip(first, second, strict=True):
        if not (math.isnan(a) or math.isnan(b)):
            cells[(a == 1.0, b == 1.0)] += 1
    return PairCounts(
        cells[(True, True)], cells[(True, False)], cells[(False, True)], cells[(False, False)]
    )


def mcnemar_exact(first_only: int, second_only: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of ``first_only`` out of the discordant
    documents against 1/2 (1.0 without discordant documents; NaN without scipy)."""
    discordant = first_only + second_only
    if discordant == 0:
        return 1.0
    try:
        from scipy.stats import binomtest
    except ImportError:  # the `report` extra brings scipy
        return math.nan
    return float(binomtest(first_only, discordant, 0.5).pvalue)


def _corrected_phi(cross: int, n: int) -> float:
    """Numerator of the correlation estimate, as Newcombe corrects it: a positive
    ``ad - bc`` is reduced by n/2 (not below 0); a negative one is kept."""
    if cross > n / 2:
        return cross - n / 2
    return float(min(cross, 0))


def paired_difference(counts: PairCounts, z: float = Z95) -> Interval | None:
    """Difference of the two accuracies (first minus second) with Newcombe's (1998, method
    10) interval: the Wilson intervals of both, combined with their estimated correlation
    (corrected as in Newcombe's paper and Fagerland, Lydersen & Laake 2017, ch. 8)."""
    n = counts.n
    if n == 0:
        return None
    a, b, c, d = counts.both, counts.first_only, counts.second_only, counts.neither
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = _corrected_phi(a * d - b * c, n) / math.sqrt(margins) if margins else 0.0
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    difference = p1 - p2
    return Interval(difference, max(-1.0, difference - below), min(1.0, difference + above), n)


def compare(per_doc: Mapping[str, Sequence[float]], first: str, second: str) -> Comparison | None:
    """``first`` against ``second`` on the documents both were computed on; None when either
    method's values are missing or no document has both."""
    if first not in per_doc or second not in per_doc:
        return None
    counts = pair_counts(per_doc[first], per_doc[second])
    difference = paired_difference(counts)
    if difference is None:
        return None
    return Comparison(
        first, second, difference, counts, mcnemar_exact(counts.first_only, counts.second_only)
    )


def lead(
    shown: Mapping[str, float], per_doc: Mapping[str, Sequence[float]] | None
) -> list[Comparison] | None:
    """The best method against each runner-up (the methods with the second-highest shown
    accuracy); None when there is no single best, no runner-up, or no samples."""
    valid = {m: v for m, v in shown.items() if not math.isnan(v)}
    ranked = sorted(set(valid.values()), reverse=True)
    if not per_doc or len(ranked) < 2:
        return None
    best = [m for m, v in valid.items() if v == ranked[0]]
    if len(best) != 1:
        return None
    comparisons = [compare(per_doc, best[0], m) for m, v in valid.items() if v == ranked[1]]
    return None if any(c is None for c in comparisons) else comparisons  # type: ignore[return-value]


def lead_p_value(
    shown: Mapping[str, float], per_doc: Mapping[str, Sequence[float]] | None
) -> float | None:
    """McNemar p-value of the best method's lead over the runner-up (the largest when
    several tie for second place); None when ``lead`` is None."""
    comparisons = lead(shown, per_doc)
    if comparisons is None:
        return None
    p_values = [c.p_value for c in comparisons]
    return math.nan if any(math.isnan(p) for p in p_values) else max(p_values)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1); std NaN with fewer than 2 values; both
    NaN when a value is NaN or there is none."""
    if not values or any(math.isnan(v) for v in values):
        return (math.nan, math.nan)
    std = statistics.stdev(values) if len(values) > 1 else math.nan
    return (statistics.fmean(values), std)
