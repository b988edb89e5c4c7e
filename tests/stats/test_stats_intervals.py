"""Wilson and clustered intervals, checked against statsmodels and by hypothesis properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from stats import clustered_mean, wilson_interval


@pytest.mark.parametrize(
    ("successes", "n"), [(0, 1), (1, 1), (2, 3), (0, 10), (7, 10), (10, 10), (13, 17), (499, 1000)]
)
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_it_matches_statsmodels_wilson(successes, n, confidence):
    low, high = wilson_interval(successes, n, confidence)
    ref_low, ref_high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)


def test_it_knows_nothing_from_zero_trials():
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("successes", "n"), [(-1, 3), (4, 3), (0, -1)])
def test_it_refuses_impossible_counts(successes, n):
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(successes, n)


@given(st.integers(0, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_it_keeps_wilson_inside_0_1_around_the_estimate(pair):
    successes, n = pair
    low, high = wilson_interval(successes, n)
    assert 0.0 <= low <= high <= 1.0
    if n:
        assert low <= successes / n <= high


def _cluster_se(outcomes: list[list[int]], weighted: bool) -> tuple[float, float]:
    y = np.concatenate([np.array(o, dtype=float) for o in outcomes])
    groups = np.concatenate([np.full(len(o), i) for i, o in enumerate(outcomes)])
    x = np.ones((len(y), 1))
    if weighted:
        weights = np.concatenate([np.full(len(o), 1.0 / len(o)) for o in outcomes])
        fit = sm.WLS(y, x, weights=weights).fit(cov_type="cluster", cov_kwds={"groups": groups})
    else:
        fit = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": groups})
    return float(fit.params[0]), float(fit.bse[0])


def test_it_matches_statsmodels_cluster_robust_ols_for_equal_trials():
    rng = np.random.default_rng(7)
    outcomes = [list(rng.integers(0, 2, 5)) for _ in range(40)]
    result = clustered_mean(outcomes)
    mean, se = _cluster_se(outcomes, weighted=False)
    assert result.mean == pytest.approx(mean, abs=1e-12)
    # statsmodels' default correction C/(C-1)·(N-1)/(N-K) equals our ddof=1 with K = 1.
    assert result.se == pytest.approx(se, rel=1e-10)
    assert result.n_cases == 40
    assert result.ci_low == pytest.approx(max(0.0, mean - 1.959963984540054 * se), rel=1e-9)


def test_it_matches_statsmodels_weighted_cluster_se_for_unequal_trials():
    rng = np.random.default_rng(11)
    outcomes = [list(rng.integers(0, 2, int(rng.integers(1, 8)))) for _ in range(30)]
    result = clustered_mean(outcomes)
    mean, se = _cluster_se(outcomes, weighted=True)
    assert result.mean == pytest.approx(mean, abs=1e-12)
    assert result.mean == pytest.approx(np.mean([np.mean(o) for o in outcomes]), abs=1e-12)
    assert result.se == pytest.approx(se, rel=1e-10)


def test_it_computes_a_hand_example():
    # Case rates 1, 0.5, 0: mean 0.5, s² = 0.25, SE = sqrt(0.25/3).
    result = clustered_mean([[1, 1], [1, 0], [0, 0]])
    assert result.mean == 0.5
    assert result.se == pytest.approx(math.sqrt(0.25 / 3))
    assert (result.ci_low, result.ci_high) == (0.0, 1.0)  # 0.5 ± 0.566, clipped to [0, 1]
    narrow = clustered_mean([0.6, 0.4, 0.5, 0.5])
    se = math.sqrt((0.01 + 0.01) / 3 / 4)
    assert narrow.se == pytest.approx(se)
    assert narrow.ci_low == pytest.approx(0.5 - 1.959963984540054 * se)
    assert narrow.ci_high == pytest.approx(0.5 + 1.959963984540054 * se)


def test_it_accepts_case_rates_directly():
    assert clustered_mean([1.0, 0.5, 0.0]) == clustered_mean([[1, 1], [1, 0], [0, 0]])


def test_it_leaves_se_undefined_for_one_case_and_everything_for_none():
    one = clustered_mean([[1, 0, 1]])
    assert (one.mean, one.se, one.ci_low, one.ci_high, one.n_cases) == (2 / 3, None, None, None, 1)
    none = clustered_mean([])
    assert (none.mean, none.se, none.n_cases) == (None, None, 0)


@pytest.mark.parametrize("bad", [[[]], [[2]], [1.5], [float("nan")]])
def test_it_refuses_bad_case_values(bad):
    with pytest.raises(ValueError, match="case 0"):
        clustered_mean(bad)


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=2, max_size=60))
def test_it_keeps_the_clustered_interval_inside_0_1_around_the_mean(outcomes):
    result = clustered_mean(outcomes)
    assert 0.0 <= result.ci_low <= result.mean <= result.ci_high <= 1.0
    assert result.se >= 0.0
