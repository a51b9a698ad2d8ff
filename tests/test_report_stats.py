"""The report's statistics (lm_eval_dcpmi.report._stats) on hand-computed numbers."""

from __future__ import annotations

import math

import pytest
from report_helpers import DCPMI, LM

from lm_eval_dcpmi.report import _stats as stats

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

NAN = float("nan")

# Ten documents, DC-PMI against LM (report_helpers.DCPMI and LM, which the report tests'
# ten-document run logs as samples):
#   both right: docs 0-2 (a = 3); only DC-PMI: docs 3-6 (b = 4); only LM: doc 7 (c = 1);
#   neither: docs 8-9 (d = 2). DC-PMI 7/10, LM 4/10.


def test_wilson_interval_by_formula():
    # p = 0.7, n = 10, z = 1.959964 (z^2 = 3.841459):
    #   centre = (0.7 + z^2/20) / (1 + z^2/10) = 0.892073 / 1.384146 = 0.644493
    #   half   = z / 1.384146 * sqrt(0.7 * 0.3 / 10 + z^2 / 400) = 1.416010 * 0.174939 = 0.247716
    low, high = stats.wilson(7, 10)
    assert (low, high) == (pytest.approx(0.396778, abs=1e-6), pytest.approx(0.892209, abs=1e-6))
    # 0 of 10: the interval starts at 0 and is not empty (unlike the normal approximation).
    low, high = stats.wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(3.841459 / 13.841459, abs=1e-6)
    assert all(math.isnan(v) for v in stats.wilson(0, 0))


def test_accuracy_interval_skips_nan_documents():
    interval = stats.accuracy_interval([*DCPMI, NAN])
    assert (interval.value, interval.n) == (0.7, 10)
    assert interval.low == pytest.approx(0.396778, abs=1e-6)
    assert stats.accuracy_interval([NAN, NAN]) is None


def test_pair_counts_and_mcnemar_exact():
    counts = stats.pair_counts(DCPMI, LM)
    assert (counts.both, counts.first_only, counts.second_only, counts.neither) == (3, 4, 1, 2)
    # Discordant pairs: 4 vs 1 of 5. Two-sided exact binomial test at 1/2:
    #   p = 2 * P(X <= 1 | Bin(5, 1/2)) = 2 * (1 + 5) / 32 = 0.375
    assert stats.mcnemar_exact(4, 1) == pytest.approx(0.375)
    # 9 vs 0 of 9: p = 2 / 2**9 = 0.00390625; no discordant pair: p = 1.
    assert stats.mcnemar_exact(0, 9) == pytest.approx(2 / 2**9)
    assert stats.mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError, match="same documents"):
        stats.pair_counts(DCPMI, LM[:-1])


def test_paired_difference_by_formula():
    counts = stats.pair_counts(DCPMI, LM)
    interval = stats.paired_difference(counts)
    # p1 = 0.7 (Wilson 0.396778..0.892209), p2 = 0.4 (Wilson 0.168180..0.687326).
    # ad - bc = 6 - 4 = 2 <= n/2 = 5, so the corrected correlation is 0 and
    #   low  = 0.3 - sqrt((0.7 - 0.396778)^2 + (0.687326 - 0.4)^2) = 0.3 - 0.417732
    #   high = 0.3 + sqrt((0.892209 - 0.7)^2 + (0.4 - 0.168180)^2) = 0.3 + 0.301139
    assert interval.value == pytest.approx(0.3)
    assert interval.low == pytest.approx(-0.117732, abs=1e-6)
    assert interval.high == pytest.approx(0.601139, abs=1e-6)


def test_paired_difference_matches_a_published_example():
    # Airway hyper-responsiveness before/after stem cell transplantation (Bentur et al.
    # 2009), a worked example of Fagerland, Lydersen & Laake (2014, paired binomial
    # proportions): a=1, b=1, c=7, d=12; Newcombe's hybrid score interval -0.507 to
    # -0.026, McNemar's exact p = 0.070.
    counts = stats.PairCounts(1, 1, 7, 12)
    interval = stats.paired_difference(counts)
    assert interval.value == pytest.approx(-6 / 21)
    assert (round(interval.low, 3), round(interval.high, 3)) == (-0.507, -0.026)
    assert round(stats.mcnemar_exact(1, 7), 3) == 0.070


def test_compare_and_lead():
    per_doc = {"acc_dcpmi": DCPMI, "acc": LM, "acc_unc": [0.0] * 10}
    comparison = stats.compare(per_doc, "acc_dcpmi", "acc")
    assert comparison.difference.value == pytest.approx(0.3)
    assert comparison.p_value == pytest.approx(0.375) and not comparison.significant
    assert stats.compare(per_doc, "acc_dcpmi", "acc_avg") is None
    shown = {"acc_dcpmi": 70.0, "acc": 40.0, "acc_unc": 0.0}
    assert stats.lead_p_value(shown, per_doc) == pytest.approx(0.375)
    # Against Unc alone (7 vs 0 discordant): p = 2 / 2**7 = 0.015625, significant.
    shown = {"acc_dcpmi": 70.0, "acc": NAN, "acc_unc": 0.0}
    assert stats.lead_p_value(shown, per_doc) == pytest.approx(2 / 2**7)
    # A tie for best: no lead; no samples: unknown.
    assert stats.lead_p_value({"acc_dcpmi": 70.0, "acc": 70.0}, per_doc) is None
    assert stats.lead_p_value({"acc_dcpmi": 70.0, "acc": 40.0}, None) is None


def test_mean_and_sample_std():
    # Values 0.5, 0.6, 0.7, 0.8: mean 0.65; squared deviations 0.0225 + 0.0025 + 0.0025 +
    # 0.0225 = 0.05; sample variance 0.05 / 3; std = 0.129099.
    mean, std = stats.mean_std([0.5, 0.6, 0.7, 0.8])
    assert mean == pytest.approx(0.65) and std == pytest.approx(0.129099, abs=1e-6)
    mean, std = stats.mean_std([0.5])
    assert mean == 0.5 and math.isnan(std)
    assert all(math.isnan(v) for v in stats.mean_std([0.5, NAN]))
