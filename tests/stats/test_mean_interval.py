"""clustered_mean_interval: the t interval of per-case mean scores against scipy.stats, and
no interval (with the reason) when no spread is seen."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from stats.intervals import clustered_mean_interval

FAST = settings(
    max_examples=100, deadline=200, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@pytest.mark.parametrize(
    "values", [[0.2, 0.9, 0.5], [3.0, 7.5, 4.0, 10.0, -2.0], [1.0, 1.0, 1.0, 0.0] * 5]
)
def test_matches_scipy_t_interval(values):
    got = clustered_mean_interval(values)
    low, high = sps.t.interval(0.95, len(values) - 1, np.mean(values), sps.sem(values))
    assert (got.mean, got.ci_low, got.ci_high) == pytest.approx((np.mean(values), low, high))
    assert got.se == pytest.approx(sps.sem(values))
    assert got.note == ""


@FAST
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40))
def test_an_interval_is_never_of_zero_width(values):
    got = clustered_mean_interval(values)
    if got.ci_low is None:
        assert got.note
        assert len(values) == 1 or np.ptp(values) == 0 or got.se < 1e-300
    else:
        assert got.ci_low < got.mean < got.ci_high


def test_no_spread_and_one_case_say_so():
    got = clustered_mean_interval([0.7, 0.7, 0.7])
    assert (got.mean, got.ci_low, got.ci_high, got.note) == (
        pytest.approx(0.7),
        None,
        None,
        "no spread seen in 3 cases",
    )
    got = clustered_mean_interval([4.0])
    assert (got.mean, got.se, got.ci_low, got.note) == (
        4.0,
        None,
        None,
        "one case: spread between cases unknown",
    )
    assert clustered_mean_interval([]).mean is None
    with pytest.raises(ValueError, match="finite"):
        clustered_mean_interval([1.0, float("nan")])
