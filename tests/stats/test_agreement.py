"""Agreement statistics against statsmodels and the faults file (D1)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
from statsmodels.stats.proportion import proportion_confint

from stats.agreement import cohens_kappa, false_accept_rate, false_reject_rate


def test_one_class_everywhere_makes_kappa_undefined_not_nan():
    result = cohens_kappa(["pass"] * 30, ["pass"] * 30)
    assert result.kappa is None and result.ci_low is None and result.se is None
    assert result.agreement == 1.0
    assert result.reason == "undefined (only one class in the labels)"


def test_29_of_30_against_one_class_gives_kappa_exactly_zero():
    human = [True] * 30
    judge = [True] * 29 + [False]
    result = cohens_kappa(judge, human)
    assert result.kappa == 0.0
    assert result.agreement == pytest.approx(29 / 30)
    assert false_accept_rate(judge, human).rate is None
    assert false_accept_rate(judge, human).reason == "undefined (no human fails)"
    frr = false_reject_rate(judge, human)
    assert (frr.numerator, frr.denominator) == (1, 30)
    assert frr.rate == pytest.approx(1 / 30)


def test_perfect_agreement_on_two_classes():
    human = [True, True, False, False]
    judge = [True, True, False, False]
    assert cohens_kappa(judge, human).kappa == 1.0
    far = false_accept_rate(judge, human)
    assert (far.rate, far.numerator, far.denominator) == (0.0, 0, 2)
    assert false_reject_rate(judge, human).rate == 0.0


def test_kappa_and_its_standard_error_match_statsmodels():
    rng = np.random.default_rng(0)
    human = rng.random(80) < 0.5
    judge = np.where(rng.random(80) < 0.8, human, ~human)
    ours = cohens_kappa(list(judge), list(human))
    table = np.array(
        [
            [np.sum(judge & human), np.sum(judge & ~human)],
            [np.sum(~judge & human), np.sum(~judge & ~human)],
        ]
    )
    reference = sm_kappa(table)
    assert ours.kappa == pytest.approx(reference.kappa)
    assert ours.se == pytest.approx(reference.std_kappa)


def test_rates_carry_wilson_intervals_like_statsmodels():
    human = [False] * 20 + [True] * 10
    judge = [True] * 3 + [False] * 17 + [True] * 10
    far = false_accept_rate(judge, human)
    low, high = proportion_confint(3, 20, method="wilson")
    assert (far.numerator, far.denominator) == (3, 20)
    assert far.ci_low == pytest.approx(low) and far.ci_high == pytest.approx(high)


def test_a_missing_verdict_is_refused_not_counted():
    with pytest.raises(ValueError, match="position 1: missing verdict"):
        false_accept_rate([True, None], [False, False])
    with pytest.raises(ValueError, match="booleans"):
        false_accept_rate(["pass"], [False])


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_kappa_is_within_minus_one_and_one_or_undefined(pairs):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    result = cohens_kappa(a, b)
    if result.kappa is None:
        assert len(set(a)) == 1 and set(a) == set(b)
    else:
        assert -1.0 <= result.kappa <= 1.0
        assert result.ci_low <= result.kappa <= result.ci_high


def test_perfect_agreement_has_an_interval_of_positive_width():
    """30 of 30 agreements, half fails: the large-sample SE is 0; the interval is the one
    the agreement's Wilson interval (0.8865, 1) implies at p_e = 0.5: (0.773, 1)."""
    labels = [True] * 15 + [False] * 15
    result = cohens_kappa(labels, labels)
    assert result.kappa == 1.0 and result.se == 0.0
    assert result.ci_low == pytest.approx(2 * 0.886491 - 1, abs=1e-5)
    assert result.ci_high == 1.0
