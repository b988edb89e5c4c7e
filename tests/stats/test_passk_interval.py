"""pass^k and pass@k intervals (stats.passk): the block construction checked by brute force
and against an independent scipy.stats reference, properties (hypothesis, bounded cost),
equality with clustered_rate_interval at k = 1, and exact coverage by enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from stats.intervals import clustered_rate_interval, korn_graubard_interval
from stats.passk import pass_at_k, pass_at_k_interval, pass_hat_k, pass_hat_k_interval

FAST = settings(
    max_examples=100, deadline=300, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@st.composite
def suites(draw):
    """(passed, graded, k): 1–12 cases, 1–10 trials each, k <= the fewest trials."""
    n_cases = draw(st.integers(1, 12))
    graded = draw(st.lists(st.integers(1, 10), min_size=n_cases, max_size=n_cases))
    passed = [draw(st.integers(0, n)) for n in graded]
    k = draw(st.integers(1, min(graded)))
    return np.array(passed), np.array(graded), k


def reference(estimates, blocks, confidence=0.95):
    """The documented construction on blocks, written independently with scipy.stats."""
    e = np.asarray(estimates, float)
    b = np.asarray(blocks, float)
    alpha = 1 - confidence
    c = len(e)
    m = e.mean()
    if c == 1:
        n_star = b[0]
    else:
        nk = c * c / np.sum(1 / b)
        v = e.var(ddof=1) / c
        n_star = nk
        if v > 0 and 0 < m < 1:
            deff = v / (m * (1 - m) / (nk - 1))
            t_ratio = sps.t.ppf(1 - alpha / 2, nk - 1) / sps.t.ppf(1 - alpha / 2, c - 1)
            n_star = min(nk, nk / deff * t_ratio**2)
    x = m * n_star
    low = 0.0 if x <= 0 else sps.beta.ppf(alpha / 2, x, n_star - x + 1)
    high = 1.0 if x >= n_star else sps.beta.ppf(1 - alpha / 2, x + 1, n_star - x)
    return m, min(low, m), max(high, m)


def test_unbiased_estimator_is_the_mean_block_estimator_over_arrangements():
    """Brute force: C(c,k)/C(n,k) is the block estimator (share of the floor(n/k) disjoint
    blocks of k that pass entirely) averaged over every order of the n outcomes (the
    Rao–Blackwell step the interval's conservativeness rests on)."""
    for n in range(1, 7):
        for c in range(n + 1):
            outcomes = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                b = n // k
                shares = [
                    sum(all(order[j * k : (j + 1) * k]) for j in range(b)) / b
                    for order in itertools.permutations(outcomes)
                ]
                assert math.isclose(sum(shares) / len(shares), pass_hat_k(n, c, k), abs_tol=1e-12)
                fails = [
                    sum(not any(order[j * k : (j + 1) * k]) for j in range(b)) / b
                    for order in itertools.permutations(outcomes)
                ]
                assert math.isclose(1 - sum(fails) / len(fails), pass_at_k(n, c, k), abs_tol=1e-12)


@pytest.mark.parametrize(
    ("passed", "graded", "k"),
    [
        ([3, 1, 0, 2], [3, 3, 3, 3], 2),
        ([5, 4, 2], [5, 7, 5], 2),
        ([9, 10, 10, 7, 10], [10, 10, 10, 10, 10], 3),
        ([4], [6], 2),
        ([2, 5, 5], [5, 5, 5], 5),
    ],
)
def test_matches_the_independent_reference_on_blocks(passed, graded, k):
    n = np.array(graded)
    hat = [pass_hat_k(g, p, k) for p, g in zip(passed, graded, strict=True)]
    got = pass_hat_k_interval(np.array(passed), n, k)
    m, low, high = reference(hat, n // k)
    assert (got.mean, got.ci_low, got.ci_high) == pytest.approx((m, low, high), abs=1e-9)
    fail = [1 - pass_at_k(g, p, k) for p, g in zip(passed, graded, strict=True)]
    got = pass_at_k_interval(np.array(passed), n, k)
    m, low, high = reference(fail, n // k)
    assert (got.mean, got.ci_low, got.ci_high) == pytest.approx(
        (1 - m, 1 - high, 1 - low), abs=1e-9
    )


def test_k_equal_to_every_case_trials_is_clopper_pearson_of_cases_passing_all():
    passed, graded = np.array([5, 5, 3, 5, 0]), np.array([5] * 5)
    got = pass_hat_k_interval(passed, graded, 5)
    low = sps.beta.ppf(0.025, 3, 3)
    high = sps.beta.ppf(0.975, 4, 2)
    assert (got.mean, got.ci_low, got.ci_high) == pytest.approx((0.6, low, high), abs=1e-9)


@FAST
@given(suites())
def test_contains_the_point_and_never_has_zero_width(suite):
    passed, graded, k = suite
    for r in (pass_hat_k_interval(passed, graded, k), pass_at_k_interval(passed, graded, k)):
        assert 0.0 <= r.ci_low <= r.mean <= r.ci_high <= 1.0
        assert r.ci_high > r.ci_low
    hat = np.mean([pass_hat_k(int(g), int(p), k) for p, g in zip(passed, graded, strict=True)])
    at = np.mean([pass_at_k(int(g), int(p), k) for p, g in zip(passed, graded, strict=True)])
    assert pass_hat_k_interval(passed, graded, k).mean == pytest.approx(hat, abs=1e-12)
    assert pass_at_k_interval(passed, graded, k).mean == pytest.approx(at, abs=1e-12)


@FAST
@given(suites())
def test_k_1_is_the_clustered_rate_interval(suite):
    passed, graded, _ = suite
    rate = clustered_rate_interval(passed, graded)
    assert pass_hat_k_interval(passed, graded, 1) == rate  # exactly: one implementation
    at = pass_at_k_interval(passed, graded, 1)
    assert (at.mean, at.ci_low, at.ci_high) == pytest.approx(
        (rate.mean, rate.ci_low, rate.ci_high), abs=1e-9
    )


@pytest.mark.parametrize("value", [0, 1])
def test_all_cases_at_one_or_zero_still_have_width(value):
    graded = np.full(12, 5)
    passed = graded * value
    for k in (1, 2, 3, 5):
        for r in (pass_hat_k_interval(passed, graded, k), pass_at_k_interval(passed, graded, k)):
            assert r.mean == value
            assert r.ci_high > r.ci_low
            assert r.ci_low <= value <= r.ci_high


def test_exact_coverage_by_enumeration_on_small_suites():
    """Every outcome of 3 cases × 3 trials enumerated (no Monte Carlo): coverage of p^k and
    1 − (1 − p)^k with every case at rate p is at least 95% on a grid of p."""
    outcomes = list(itertools.product(range(4), repeat=3))
    graded = np.full(3, 3)
    for k in (1, 2, 3):
        for p in np.linspace(0.05, 0.95, 19):
            prob = sps.binom.pmf(np.array(outcomes), 3, p).prod(axis=1)
            cover_hat = cover_at = 0.0
            for weight, passed in zip(prob, outcomes, strict=True):
                hat = pass_hat_k_interval(np.array(passed), graded, k)
                at = pass_at_k_interval(np.array(passed), graded, k)
                cover_hat += weight * (hat.ci_low - 1e-12 <= p**k <= hat.ci_high + 1e-12)
                truth = 1 - (1 - p) ** k
                cover_at += weight * (at.ci_low - 1e-12 <= truth <= at.ci_high + 1e-12)
            assert cover_hat >= 0.95, (k, p, cover_hat)
            assert cover_at >= 0.95, (k, p, cover_at)


def test_refuses_bad_input():
    with pytest.raises(ValueError, match="graded >= k"):
        pass_hat_k_interval(np.array([1, 2]), np.array([2, 3]), 3)
    with pytest.raises(ValueError, match="integer"):
        pass_at_k_interval(np.array([0.5]), np.array([2.0]), 1)
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k_interval(np.array([1]), np.array([2]), 0)
    with pytest.raises(ValueError, match="trials >= 1"):
        korn_graubard_interval(np.array([0.5]), np.array([0.5]))
    assert pass_hat_k_interval(np.array([], dtype=int), np.array([], dtype=int), 2).mean is None
