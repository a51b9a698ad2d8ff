"""The decision rules on hand-computed numbers."""

import doctest
import math

import pytest

from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.rules._scoring import DocumentScores

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

INF, NAN = math.inf, math.nan
# The paper's five rules (every DC-PMI task reports them), on one domain premise.
# The paper's five methods (the table may hold more rules; these tests are about these).
PAPER = ("acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi")
FIVE = [scoring.METRIC_BY_NAME[name] for name in PAPER]


def predictions(conditional, domain, n_tokens=None, n_chars=None):
    doc = DocumentScores(conditional, {"domain": domain}, n_tokens, n_chars)
    return scoring.predictions(doc, FIVE)


def accuracies(conditional, domain, gold, n_tokens=None, n_chars=None):
    doc = DocumentScores(conditional, {"domain": domain}, n_tokens, n_chars)
    return scoring.accuracies(doc, gold, FIVE)


def test_each_method_can_pick_a_different_option():
    # LM: max(-4, -5, -9) -> 0.  Avg: -4/1, -5/2, -9/6 = -4, -2.5, -1.5 -> 2.
    # Char: -4/10, -5/5, -9/30 = -0.4, -1, -0.3 -> 2.  Unc: max(-2, -4.5, -8) -> 0.
    # DC-PMI: -4+2, -5+4.5, -9+8 = -2, -0.5, -1 -> 1.
    assert predictions([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], [1, 2, 6], [10, 5, 30]) == {
        "acc_unc": 0,
        "acc": 0,
        "acc_avg": 2,
        "acc_norm": 2,
        "acc_dcpmi": 1,
    }
    # per character and per token can disagree: -4/2, -5/4 -> 1 per token; -4/8, -5/5 -> 0
    assert predictions([-4.0, -5.0], [-1.0, -1.0], [2, 4], [8, 5])["acc_avg"] == 1
    assert predictions([-4.0, -5.0], [-1.0, -1.0], [2, 4], [8, 5])["acc_norm"] == 0


def test_accuracies_compare_each_prediction_with_gold():
    scores = accuracies([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], 1, [1, 2, 6], [10, 5, 30])
    assert scores == {
        "acc_unc": 0.0,
        "acc": 0.0,
        "acc_avg": 0.0,
        "acc_norm": 0.0,
        "acc_dcpmi": 1.0,
        "unranked": 0.0,
    }
    assert accuracies([-4.0, -5.0, -9.0], [-2.0, -4.5, -8.0], 2, [1, 2, 6])["acc_avg"] == 1.0


def test_domain_premise_that_favours_an_option_is_subtracted():
    # The 'popular' option 1 wins on raw probability but is just as likely without the
    # premise; option 0 gains more from the premise: -6 - (-9) = 3 > -3 - (-5) = 2.
    assert predictions([-6.0, -3.0], [-9.0, -5.0])["acc_dcpmi"] == 0
    assert predictions([-6.0, -3.0], [-9.0, -5.0])["acc"] == 1


def test_ties_go_to_the_lowest_index():
    assert predictions([-2.0, -2.0], [-1.0, -1.0], [1, 1], [3, 3]) == dict.fromkeys(PAPER, 0)
    # tie between options 1 and 2 only
    assert predictions([-5.0, -2.0, -2.0], [-9.0, -1.0, -1.0], [1, 1, 1]) == {
        "acc_unc": 1,
        "acc": 1,
        "acc_avg": 1,
        "acc_norm": None,  # no character counts given
        "acc_dcpmi": 0,  # -5+9 = 4 beats -1 and -1
    }
    # DC-PMI tie: -3+2 = -1 and -1+0 = -1
    assert predictions([-3.0, -1.0], [-2.0, 0.0])["acc_dcpmi"] == 0
    # Avg tie: -4/2 = -2 and -6/3 = -2
    assert predictions([-4.0, -6.0], [-1.0, -1.0], [2, 3])["acc_avg"] == 0


def test_without_counts_avg_and_char_are_unknown_not_guessed():
    result = accuracies([-1.0, -2.0], [-1.0, -1.0], 0)
    assert math.isnan(result["acc_avg"]) and math.isnan(result["acc_norm"])
    assert result["acc"] == 1.0 and result["acc_dcpmi"] == 1.0 and result["unranked"] == 0.0


def test_nan_and_minus_infinity_never_win_and_never_default_to_option_0():
    # option 0 has no score: option 1 wins every method
    assert predictions([NAN, -3.0], [-1.0, -2.0])["acc"] == 1
    assert predictions([-INF, -3.0], [-1.0, -2.0])["acc"] == 1
    # DC-PMI: option 1 cannot be produced without the premise: +inf beats any number
    assert predictions([-3.0, -2.0], [-1.0, -INF])["acc_dcpmi"] == 1
    assert predictions([-3.0, -2.0], [-1.0, -INF])["acc_unc"] == 0


def test_a_method_with_no_finite_score_counts_the_document_wrong_and_unranked():
    # every conditional score -inf: LM, Avg, Char and DC-PMI cannot rank; Unc can
    scores = accuracies([-INF, -INF], [-1.0, -2.0], 0, [1, 1], [3, 3])
    assert scores == {
        "acc_unc": 1.0,
        "acc": 0.0,  # wrong, although gold is option 0
        "acc_avg": 0.0,
        "acc_norm": 0.0,
        "acc_dcpmi": 0.0,
        "unranked": 1.0,
    }
    assert accuracies([NAN, NAN], [NAN, NAN], 0)["unranked"] == 1.0
    assert predictions([NAN, NAN], [NAN, NAN])["acc"] is None


@pytest.mark.parametrize(
    ("conditional", "domain", "n_tokens"),
    [([], [], []), ([-1.0, -2.0], [-1.0], [1, 1]), ([-1.0, -2.0], [-1.0, -1.0], [1, 0])],
)
def test_malformed_inputs_are_refused(conditional, domain, n_tokens):
    with pytest.raises(ValueError):
        predictions(conditional, domain, n_tokens)


def test_every_method_has_a_report_label():
    assert set(looks.LABELS) == set(scoring.METHODS)
    assert {name: looks.LABELS[name] for name in PAPER} == {
        "acc_unc": "Unc",
        "acc": "LM",
        "acc_avg": "Avg",
        "acc_norm": "Char",
        "acc_dcpmi": "DC-PMI",
    }


def test_docstring_example():
    tried = doctest.testmod(scoring)
    assert tried.failed == 0 and tried.attempted >= 2


def test_the_tests_own_recompute_agrees_with_the_rules():
    # tests/recompute.py checks logged metrics apart from this module: both must agree,
    # on ties, NaN and -inf as well as on plain numbers.
    import random

    from recompute import expected_metrics

    rng = random.Random(16)
    pool = [-1.0, -2.0, -2.0, -3.5, -0.25, NAN, -INF]
    for _ in range(2000):
        n = rng.randint(1, 5)
        conditional = [rng.choice(pool) for _ in range(n)]
        domain = [rng.choice(pool) for _ in range(n)]
        n_tokens = [rng.randint(1, 4) for _ in range(n)]
        n_chars = [rng.randint(1, 9) for _ in range(n)]
        gold = rng.randrange(n)
        assert expected_metrics(conditional, domain, gold, n_tokens, n_chars) == accuracies(
            conditional, domain, gold, n_tokens, n_chars
        ), (conditional, domain, gold, n_tokens, n_chars)


def test_pma_is_the_options_probability_mass_by_hand():
    # e^-1 + e^-2 + e^-3 = 0.3678794412 + 0.1353352832 + 0.0497870684
    assert scoring.option_mass([-1.0, -2.0, -3.0]) == pytest.approx(0.5530017928, abs=1e-10)
    doc = DocumentScores([math.log(0.2), math.log(0.3)], {"domain": [math.log(0.05)] * 2})
    assert scoring.measures(doc) == pytest.approx({"pma": 0.5, "pma_domain": 0.1}, abs=1e-15)
    # an impossible option adds nothing; a document whose options are all impossible has 0
    assert scoring.option_mass([math.log(0.25), -INF]) == pytest.approx(0.25, abs=1e-15)
    assert scoring.option_mass([-INF, -INF]) == 0.0
    # an option not computed makes the mass unknown, and +inf is no log-probability
    assert math.isnan(scoring.option_mass([-1.0, NAN]))
    assert math.isnan(scoring.option_mass([-1.0, INF]))


def test_pma_of_options_near_probability_0_by_log_sum_exp():
    # each option's exp(-745.2) underflows to 0.0, but 1000 of them hold e^-745.2 * 1000
    # = e^(-745.2 + 6.9078) = e^-738.29: a sum of exps says 0, log-sum-exp does not
    tiny = [-745.2] * 1000
    assert sum(math.exp(x) for x in tiny) == 0.0
    assert scoring.option_mass(tiny) == pytest.approx(math.exp(-745.2 + math.log(1000)))
    assert scoring.option_mass(tiny) > 0
    # beside a likely option the tiny ones change nothing
    assert scoring.option_mass([math.log(0.5), -800.0, -900.0]) == pytest.approx(0.5, abs=1e-15)


def test_measures_are_reported_after_the_accuracies_with_no_direction():
    names = [m.name for m in scoring.task_metrics(("domain",), fixed_labels=True)]
    assert names[-5:] == ["pma", "pma_domain", "truncated", "unranked", "tied_domain"]
    assert scoring.MEASURES == ("pma", "pma_domain")
    for name in scoring.MEASURES:
        row = scoring.METRIC_BY_NAME[name]
        assert (row.kind, row.aggregation, row.higher_is_better) == ("measure", "mean", None)
        assert not row.in_first_release and not row.group_mean
        assert name not in scoring.ALL_ACCURACIES
