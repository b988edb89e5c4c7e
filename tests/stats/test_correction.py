"""Rogan–Gladen correction: formula, clipping, undefined boundary, interval properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stats.correction import corrected_pass_rate

prop = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def test_it_applies_the_rogan_gladen_formula():
    # (0.6 + 0.9 - 1) / (0.8 + 0.9 - 1) = 0.5 / 0.7
    r = corrected_pass_rate(0.6, 0.8, 0.9)
    assert r.estimate == pytest.approx(0.5 / 0.7)
    assert not r.clipped and r.se is None and r.ci_low is None


def test_it_leaves_a_perfect_judge_unchanged():
    assert corrected_pass_rate(0.37, 1.0, 1.0).estimate == pytest.approx(0.37)


def test_it_clips_to_the_unit_interval():
    r = corrected_pass_rate(0.05, 0.9, 0.8)  # (0.05 - 0.2) / 0.7 < 0
    assert (r.estimate, r.clipped) == (0.0, True)


def test_it_is_undefined_for_a_judge_no_better_than_chance():
    r = corrected_pass_rate(0.5, 0.5, 0.5)
    assert r.estimate is None and "no better than chance" in r.reason


def test_it_matches_the_delta_method_variance_by_hand():
    r = corrected_pass_rate(0.6, 0.8, 0.9, n_observed=100, n_pass=50, n_fail=40)
    theta = 0.5 / 0.7
    var = 0.6 * 0.4 / 100 + theta**2 * 0.8 * 0.2 / 50 + (1 - theta) ** 2 * 0.9 * 0.1 / 40
    assert r.se == pytest.approx((var**0.5) / 0.7)
    assert r.ci_low == pytest.approx(theta - 1.959964 * r.se, abs=1e-6)


def test_it_refuses_values_outside_zero_and_one():
    with pytest.raises(ValueError, match="tpr must be a proportion"):
        corrected_pass_rate(0.5, 1.2, 0.9)
    with pytest.raises(ValueError, match="n_fail must be a positive integer"):
        corrected_pass_rate(0.5, 0.9, 0.9, n_observed=10, n_pass=10, n_fail=0)


@given(prop, prop, prop)
def test_it_stays_in_bounds_with_the_estimate_inside_its_interval(p, tpr, tnr):
    r = corrected_pass_rate(p, tpr, tnr, n_observed=50, n_pass=30, n_fail=30)
    if tpr + tnr <= 1:
        assert r.estimate is None
        return
    assert 0.0 <= r.ci_low <= r.estimate <= r.ci_high <= 1.0
