"""The four decision rules on hand-computed numbers."""

import doctest
import math

import pytest

from lm_eval_dcpmi import scoring
from lm_eval_dcpmi.scoring import accuracies, predictions


def test_each_method_can_pick_a_different_option():
    # LM: max(-4, -5, -9) -> 0.  Avg: -4/1, -5/2, -9/6 = -4, -2.5, -1.5 -> 2.
    # Unc: max(-2, -4.5, -8) -> 0.  DC-PMI: -4+2, -5+4.5, -9+8 = -2, -0.5, -1 -> 1.
    assert predictions([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], [1, 2, 6]) == {
        "acc": 0,
        "acc_avg": 2,
        "acc_unc": 0,
        "acc_dcpmi": 1,
    }


def test_accuracies_compare_each_prediction_with_gold():
    assert accuracies([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], [1, 2, 6], gold=1) == {
        "acc": 0.0,
        "acc_avg": 0.0,
        "acc_unc": 0.0,
        "acc_dcpmi": 1.0,
    }
    assert accuracies([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], [1, 2, 6], gold=2)["acc_avg"] == 1.0


def test_domain_premise_that_favours_an_option_is_subtracted():
    # The 'popular' option 1 wins on raw probability but is just as likely without the
    # premise; option 0 gains more from the premise: -6 - (-9) = 3 > -3 - (-5) = 2.
    assert predictions([-6.0, -3.0], [-9.0, -5.0], [2, 2])["acc_dcpmi"] == 0
    assert predictions([-6.0, -3.0], [-9.0, -5.0], [2, 2])["acc"] == 1


def test_ties_go_to_the_lowest_index():
    assert predictions([-2.0, -2.0], [-1.0, -1.0], [1, 1]) == dict.fromkeys(scoring.METRICS, 0)
    # tie between options 1 and 2 only
    assert predictions([-5.0, -2.0, -2.0], [-9.0, -1.0, -1.0], [1, 1, 1]) == {
        "acc": 1,
        "acc_avg": 1,
        "acc_unc": 1,
        "acc_dcpmi": 0,  # -5+9 = 4 beats -1 and -1
    }
    # DC-PMI tie: -3+2 = -1 and -1+0 = -1
    assert predictions([-3.0, -1.0], [-2.0, 0.0], [3, 1])["acc_dcpmi"] == 0
    # Avg tie: -4/2 = -2 and -6/3 = -2
    assert predictions([-4.0, -6.0], [-1.0, -1.0], [2, 3])["acc_avg"] == 0


def test_equal_scores_for_every_option():
    assert predictions([-1.5] * 4, [-1.5] * 4, [2] * 4) == dict.fromkeys(scoring.METRICS, 0)


def test_without_token_counts_avg_is_unknown_not_guessed():
    result = accuracies([-1.0, -2.0], [-1.0, -1.0], None, gold=0)
    assert math.isnan(result["acc_avg"])
    assert result["acc"] == 1.0 and result["acc_dcpmi"] == 1.0


@pytest.mark.parametrize(
    ("conditional", "domain", "n_tokens"),
    [([], [], []), ([-1.0, -2.0], [-1.0], [1, 1]), ([-1.0, -2.0], [-1.0, -1.0], [1, 0])],
)
def test_malformed_inputs_are_refused(conditional, domain, n_tokens):
    with pytest.raises(ValueError):
        predictions(conditional, domain, n_tokens)


def test_docstring_example():
    assert doctest.testmod(scoring).failed == 0
