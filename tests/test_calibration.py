"""Contextual calibration (CC) and batch calibration (BC) on hand-computed numbers."""

import math

import pytest
from recompute import expected_bc, expected_cc

from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.rules._scoring import DocumentScores, accuracies, predictions

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

INF, NAN = math.inf, math.nan
ln = math.log


def doc(conditional, content_free=None, domain=None):
    domain = domain if domain is not None else [-1.0] * len(conditional)
    return DocumentScores(conditional, {"domain": domain}, None, None, content_free)


# p(y|x) = [0.07, 0.03], renormalised [0.7, 0.3]. The content-free inputs, renormalised:
# 'N/A' [0.98, 0.02], '' [0.5, 0.5], '[MASK]' [0.5, 0.5]; their mean [0.66, 0.34].
# CC: 0.7 / 0.66 = 1.06 > 0.3 / 0.34 = 0.88 -> option 0.
# Averaged in log space instead (geometric mean, renormalised [0.785, 0.215]):
# 0.7 / 0.785 = 0.89 < 0.3 / 0.215 = 1.40 -> option 1. Averaged before renormalising each
# input (raw [0.49, 0.01], [0.001, 0.001], [0.001, 0.001] -> [0.976, 0.024]): option 1.
CONDITIONAL = [ln(0.07), ln(0.03)]
CONTENT_FREE = {"N/A": [ln(0.49), ln(0.01)], "": [ln(0.001)] * 2, "[MASK]": [ln(0.001)] * 2}


def test_the_content_free_prior_is_a_mean_of_renormalised_probabilities():
    prior = scoring.content_free_prior(CONTENT_FREE)
    assert prior == pytest.approx([0.66, 0.34])


def test_cc_divides_by_the_prior_averaged_in_probability_space():
    assert predictions(doc(CONDITIONAL, CONTENT_FREE))["acc_cc"] == 0
    assert predictions(doc(CONDITIONAL, CONTENT_FREE))["acc"] == 0
    # a prior that favours option 0 more than the premise does flips the pick
    strong = {"N/A": [ln(0.9), ln(0.1)], "": [ln(0.9), ln(0.1)], "[MASK]": [ln(0.8), ln(0.2)]}
    assert scoring.content_free_prior(strong) == pytest.approx([0.8667, 0.1333], abs=1e-4)
    assert predictions(doc(CONDITIONAL, strong))["acc_cc"] == 1  # 0.81 < 2.25
    assert accuracies(doc(CONDITIONAL, strong), gold=1)["acc_cc"] == 1.0


def test_cc_on_multi_token_labels_uses_whole_option_scores():
    # Options of several tokens: their loglikelihoods are sums over tokens, e.g.
    # ' terrible\n' = -2.0 + -1.5 and ' great\n' = -1.0 + -3.0; nothing is per token.
    conditional = [-2.0 + -1.5, -1.0 + -3.0]
    free = {"N/A": [-3.0, -2.0], "": [-3.0, -2.0], "[MASK]": [-3.0, -2.0]}
    # prior: softmax([-3, -2]) = [0.269, 0.731]; scores -3.5 - ln 0.269 = -2.187,
    # -4.0 - ln 0.731 = -3.687 -> option 0 (LM picks 0 too)
    assert predictions(doc(conditional, free))["acc_cc"] == 0
    free_flat = dict.fromkeys(free, [-2.0, -2.0])
    assert predictions(doc(conditional, free_flat))["acc_cc"] == 0


def test_cc_ties_go_to_the_lowest_index():
    flat = dict.fromkeys(("N/A", "", "[MASK]"), [-1.0, -1.0, -1.0])
    assert predictions(doc([-2.0, -1.0, -1.0], flat))["acc_cc"] == 1
    assert predictions(doc([-1.0, -1.0, -1.0], flat))["acc_cc"] == 0


def test_cc_without_a_finite_score_counts_wrong_and_unranked():
    flat = dict.fromkeys(("N/A", "", "[MASK]"), [-1.0, -1.0])
    result = accuracies(doc([-INF, -INF], flat), gold=0)
    assert result["acc_cc"] == 0.0 and result["unranked"] == 1.0
    # a content-free input without any finite score leaves the prior unknown
    broken = {**flat, "N/A": [-INF, -INF]}
    assert math.isnan(scoring.content_free_prior(broken)[0])
    assert accuracies(doc([-1.0, -2.0], broken), gold=0)["acc_cc"] == 0.0


def test_a_task_without_content_free_scores_reports_no_cc():
    result = accuracies(doc([-1.0, -2.0]), gold=0)
    assert math.isnan(result["acc_cc"]) and result["unranked"] == 0.0
    assert "acc_cc" not in [m.name for m in scoring.task_metrics(["domain"], False)]
    assert "acc_bc" not in [m.name for m in scoring.task_metrics(["domain"], False)]
    names = [m.name for m in scoring.task_metrics(["domain", "answer"], True)]
    assert names == [*scoring.ALL_ACCURACIES, "acc_pmi_answer", *scoring.MEASURES, *scoring.COUNTS]
    known = ["acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi", "acc_cc", "acc_bc"]
    assert [name for name in scoring.ALL_ACCURACIES if name in known] == known


# BC: documents' renormalised p(y|x) [0.9, 0.1] (gold 0), [0.6, 0.4] (gold 1),
# [0.7, 0.3] (gold 1); their mean [0.7333, 0.2667]. Divided by it: [1.23, 0.375] -> 0,
# [0.82, 1.5] -> 1, [0.95, 1.125] -> 1: all right (LM: 1 of 3).
BATCH = [([ln(0.9), ln(0.1)], 0), ([ln(0.6), ln(0.4)], 1), ([ln(0.7), ln(0.3)], 1)]


def test_bc_divides_by_the_mean_probability_over_the_documents():
    items = [scoring.batch_item(c, g) for c, g in BATCH]
    assert items[0] == pytest.approx([0.9, 0.1, 0.0])
    assert scoring.batch_decisions(items) == [1.0, 1.0, 1.0]
    assert scoring.batch_calibrated(items) == 1.0
    # the mean depends on which documents were evaluated: the first two alone have the
    # mean [0.75, 0.25], and [0.6, 0.4] -> 0.8 < 1.6 still picks 1; the first alone, 0
    assert scoring.batch_decisions(items[:2]) == [1.0, 1.0]
    assert scoring.batch_decisions(items[1:2]) == [0.0]  # [1, 1]: a tie, option 0


def test_bc_uses_probabilities_renormalised_per_document():
    # unnormalised p(y|x) [0.09, 0.01] is [0.9, 0.1]: the same decisions as above
    items = [scoring.batch_item([ln(0.09), ln(0.01)], 0)] + [
        scoring.batch_item(c, g) for c, g in BATCH[1:]
    ]
    assert scoring.batch_decisions(items) == [1.0, 1.0, 1.0]


def test_bc_leaves_a_document_without_finite_scores_out_of_the_mean_and_counts_it_wrong():
    items = [scoring.batch_item(c, g) for c, g in BATCH] + [scoring.batch_item([-INF, NAN], 0)]
    assert scoring.batch_decisions(items) == [1.0, 1.0, 1.0, 0.0]
    assert scoring.batch_calibrated(items) == 0.75


def test_bc_refuses_documents_with_other_options():
    with pytest.raises(ValueError, match="same options"):
        scoring.batch_decisions([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5, 1.0]])


def test_the_independent_recompute_agrees_on_the_hand_examples():
    assert expected_cc(CONDITIONAL, CONTENT_FREE, 0) == 1.0
    assert expected_bc(BATCH) == [1.0, 1.0, 1.0]


def test_the_independent_recompute_agrees_on_random_documents():
    # continuous scores (ties improbable: the two compute ratios differently), with some
    # options that no input can produce
    import random

    rng = random.Random(19)

    def score():
        return -math.inf if rng.random() < 0.05 else rng.uniform(-12.0, -0.1)

    for _ in range(300):
        n = rng.randint(2, 5)
        free = {text: [score() for _ in range(n)] for text in ("N/A", "", "[MASK]")}
        documents = [([score() for _ in range(n)], rng.randrange(n)) for _ in range(8)]
        for conditional, gold in documents:
            cc = accuracies(doc(conditional, free), gold)["acc_cc"]
            assert cc == expected_cc(conditional, free, gold), (conditional, free, gold)
        items = [scoring.batch_item(c, g) for c, g in documents]
        assert scoring.batch_decisions(items) == expected_bc(documents), documents
