"""clustered_rate_interval: reference values (statsmodels, an independent scipy.stats path),
properties (hypothesis, bounded cost), never zero width, a fast coverage check."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from stats.intervals import (
    clopper_pearson_interval,
    clustered_mean_of_rates,
    clustered_rate_interval,
)

FAST = settings(
    max_examples=100, deadline=200, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def reference(passed, graded, confidence=0.95):
    """The documented formula, written independently with scipy.stats (t.ppf, beta.ppf)."""
    x = np.asarray(passed, float)
    n = np.asarray(graded, float)
    c = len(x)
    alpha = 1 - confidence
    r = x / n
    m = r.mean()
    nk = c * c / np.sum(1 / n)
    v = r.var(ddof=1) / c
    n_star = nk
    if v > 0 and 0 < m < 1:
        deff = v / (m * (1 - m) / (nk - 1))
        t_ratio = sps.t.ppf(1 - alpha / 2, nk - 1) / sps.t.ppf(1 - alpha / 2, c - 1)
        n_star = min(nk, nk / deff * t_ratio**2)
    xs = m * n_star
    low = 0.0 if xs == 0 else sps.beta.ppf(alpha / 2, xs, n_star - xs + 1)
    high = 1.0 if xs >= n_star else sps.beta.ppf(1 - alpha / 2, xs + 1, n_star - xs)
    return m, low, high, n_star


@pytest.mark.parametrize(("x", "n"), [(0, 1), (1, 1), (2, 3), (0, 10), (7, 10), (10, 10), (13, 17)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_clopper_pearson_matches_statsmodels(x, n, confidence):
    low, high = clopper_pearson_interval(x, n, confidence)
    ref = proportion_confint(x, n, alpha=1 - confidence, method="beta")
    assert (low, high) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize(("x", "n"), [(0, 240), (3, 5), (5, 5), (1, 1)])
def test_one_case_is_the_clopper_pearson_interval_of_its_trials(x, n):
    r = clustered_rate_interval([x], [n])
    assert r.method == "clopper-pearson-one-case"
    assert (r.mean, r.n_cases, r.n_effective) == (x / n, 1, n)
    assert (r.ci_low, r.ci_high) == pytest.approx(proportion_confint(x, n, method="beta"))
    assert r.ci_low < r.ci_high


def test_equal_case_rates_give_the_binomial_interval_of_all_trials():
    # The reported bug: three cases at 1/5 showed "20.0% [20.0%, 20.0%]".
    r = clustered_rate_interval([1, 1, 1], [5, 5, 5])
    assert r.mean == pytest.approx(0.2)
    assert r.n_effective == pytest.approx(15)
    assert (r.ci_low, r.ci_high) == pytest.approx(proportion_confint(3, 15, method="beta"))
    old = clustered_mean_of_rates(np.array([0.2, 0.2, 0.2]))
    assert old.ci_high - old.ci_low == pytest.approx(0, abs=1e-15)  # what it replaces


@pytest.mark.parametrize(
    ("passed", "graded"),
    [([0] * 30, [8] * 30), ([0] * 240, [1] * 240), ([0], [240]), ([8] * 30, [8] * 30)],
)
def test_zero_and_full_pass_rates_are_never_of_zero_width(passed, graded):
    r = clustered_rate_interval(passed, graded)
    ref = proportion_confint(sum(passed), sum(graded), method="beta")
    assert (r.ci_low, r.ci_high) == pytest.approx(ref)  # 0/240: [0, 1.5%]
    assert r.ci_high - r.ci_low > 0.015


def test_one_trial_per_case_is_exactly_clopper_pearson_over_cases():
    # With k = 1 each case's outcome is Bernoulli(μ): the interval is exact for μ.
    outcomes = [1, 0, 1, 1, 0, 1, 1]
    r = clustered_rate_interval(outcomes, [1] * 7)
    assert r.n_effective == pytest.approx(7)
    assert (r.ci_low, r.ci_high) == pytest.approx(proportion_confint(5, 7, method="beta"))


@pytest.mark.parametrize(
    ("passed", "graded"),
    [
        ([0, 1, 2, 3], [3, 3, 3, 3]),  # spread: the df penalty binds
        ([5, 0, 5], [5, 5, 5]),
        ([4, 5, 3, 5, 5, 2, 5, 4, 5, 5, 3, 5], [5] * 12),
        ([1, 3, 0, 7, 2], [1, 4, 2, 9, 3]),  # unequal trial counts: Kish n_K
        ([2, 2, 3], [4, 4, 4]),  # spread below binomial: capped at n_K
    ],
)
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_it_matches_an_independent_implementation_of_the_formula(passed, graded, confidence):
    r = clustered_rate_interval(passed, graded, confidence=confidence)
    m, low, high, n_star = reference(passed, graded, confidence)
    assert r.method == "korn-graubard"
    assert r.mean == pytest.approx(m, abs=1e-12)
    assert r.n_effective == pytest.approx(n_star, rel=1e-9)
    assert (r.ci_low, r.ci_high) == pytest.approx((low, high), abs=1e-9)


def test_kish_effective_size_for_unequal_trial_counts():
    # All rates equal: n* = n_K = C² / Σ 1/n_i, not the total trial count.
    r = clustered_rate_interval([1, 2, 5], [2, 4, 10])
    assert r.n_effective == pytest.approx(9 / (1 / 2 + 1 / 4 + 1 / 10))
    assert r.n_effective < 16


def test_se_is_the_clustered_se_but_never_below_the_binomial_se():
    spread = clustered_rate_interval([0, 3, 0, 3], [3, 3, 3, 3])
    assert spread.se == pytest.approx(clustered_mean_of_rates(np.array([0, 1, 0, 1.0])).se)
    flat = clustered_rate_interval([1, 1, 1], [5, 5, 5])
    assert flat.se == pytest.approx(math.sqrt(0.2 * 0.8 / 15))


def test_no_cases_gives_nothing():
    r = clustered_rate_interval([], [])
    assert (r.mean, r.se, r.ci_low, r.ci_high, r.n_cases) == (None, None, None, None, 0)


@pytest.mark.parametrize(
    ("passed", "graded", "message"),
    [
        ([1, 2], [1], "1-D of one length"),
        ([[1]], [[1]], "1-D of one length"),
        ([1.5], [2], "integer counts"),
        ([True], [1], "integer counts"),
        ([3], [2], "0 <= passed <= graded"),
        ([0], [0], "graded >= 1"),
        ([-1], [2], "0 <= passed"),
    ],
)
def test_it_refuses_bad_counts(passed, graded, message):
    with pytest.raises(ValueError, match=message):
        clustered_rate_interval(passed, graded)


def test_it_refuses_a_confidence_outside_zero_and_one():
    with pytest.raises(ValueError, match="confidence"):
        clustered_rate_interval([1], [2], confidence=1.0)


def test_it_is_fast_for_two_thousand_cases():
    rng = np.random.default_rng(3)
    graded = rng.integers(1, 11, 2000)
    passed = rng.binomial(graded, rng.uniform(size=2000))
    best = math.inf
    for _ in range(20):
        start = time.perf_counter()
        clustered_rate_interval(passed, graded)
        best = min(best, time.perf_counter() - start)
    assert best < 1e-3


# (passed, graded) per case; passed folded into [0, graded] (cheap to generate and shrink).
suites = st.lists(st.tuples(st.integers(0, 12), st.integers(1, 12)), min_size=1, max_size=40).map(
    lambda cases: [(x % (n + 1), n) for x, n in cases]
)


@FAST
@given(suites)
def test_it_stays_in_0_1_with_positive_width_around_the_mean(cases):
    passed, graded = zip(*cases, strict=True)
    r = clustered_rate_interval(passed, graded)
    assert 0.0 <= r.ci_low <= r.mean <= r.ci_high <= 1.0
    assert r.ci_high - r.ci_low > 1e-4
    assert r.n_cases == len(cases) and 0 < r.n_effective <= sum(graded)


@FAST
@given(suites)
def test_it_is_symmetric_under_swapping_pass_and_fail(cases):
    passed, graded = zip(*cases, strict=True)
    r = clustered_rate_interval(passed, graded)
    s = clustered_rate_interval([n - x for x, n in cases], graded)
    assert s.mean == pytest.approx(1 - r.mean, abs=1e-12)
    assert (s.ci_low, s.ci_high) == pytest.approx((1 - r.ci_high, 1 - r.ci_low), abs=1e-9)


@FAST
@given(suites)
def test_it_widens_with_confidence(cases):
    passed, graded = zip(*cases, strict=True)
    previous = None
    for confidence in (0.5, 0.8, 0.9, 0.95, 0.99):
        r = clustered_rate_interval(passed, graded, confidence=confidence)
        if previous is not None:
            assert r.ci_low <= previous.ci_low + 1e-12
            assert r.ci_high >= previous.ci_high - 1e-12
        previous = r


@FAST
@given(suites, st.randoms(use_true_random=False))
def test_the_order_of_cases_does_not_matter(cases, random):
    shuffled = list(cases)
    random.shuffle(shuffled)
    a = clustered_rate_interval(*zip(*cases, strict=True))
    b = clustered_rate_interval(*zip(*shuffled, strict=True))
    assert (b.mean, b.ci_low, b.ci_high) == pytest.approx((a.mean, a.ci_low, a.ci_high))


@FAST
@given(suites.filter(lambda cases: len(cases) >= 2))
def test_it_is_never_narrower_than_the_exact_interval_of_all_trials(cases):
    # n* <= n_K: never more certain than if every trial were independent.
    passed, graded = zip(*cases, strict=True)
    r = clustered_rate_interval(passed, graded)
    n_k = len(cases) ** 2 / sum(1 / n for n in graded)
    low, high = clopper_pearson_interval(r.mean * n_k, n_k)
    assert r.ci_high - r.ci_low >= high - low - 1e-9


# -------------------------------------------------------------------------- fast coverage
COVERAGE_CELLS = [
    # (label, C, k, draw per-case rates, μ)
    ("3 cases at 0.2, k=5", 3, 5, lambda g, s, c: np.full((s, c), 0.2), 0.2),
    ("5 cases U(0,1), k=3", 5, 3, lambda g, s, c: g.uniform(0, 1, (s, c)), 0.5),
    ("12 cases at 0.01, k=1", 12, 1, lambda g, s, c: np.full((s, c), 0.01), 0.01),
    ("30 cases U(0.8,1), k=3", 30, 3, lambda g, s, c: g.uniform(0.8, 1, (s, c)), 0.9),
]


@pytest.mark.parametrize(("label", "c", "k", "draw", "mu"), COVERAGE_CELLS)
def test_coverage_is_near_nominal_in_small_suites(label, c, k, draw, mu):
    rng = np.random.default_rng(20261201)
    sims = 400
    passed = rng.binomial(k, draw(rng, sims, c))
    graded = np.full(c, k)
    hits = 0
    for s in range(sims):
        r = clustered_rate_interval(passed[s], graded)
        hits += r.ci_low <= mu <= r.ci_high
    # 95% nominal; 400 simulations have a Monte Carlo SE of about 1.1 points.
    assert hits / sims >= 0.90, label


def test_the_old_normal_interval_fails_that_coverage_check():
    # The check has teeth: the Miller normal interval covers 0.2 with 3 cases far below 90%.
    rng = np.random.default_rng(20261201)
    rates = rng.binomial(5, 0.2, (400, 3)) / 5
    hits = sum(
        (lambda r: r.ci_low <= 0.2 <= r.ci_high)(clustered_mean_of_rates(row)) for row in rates
    )
    assert hits / 400 < 0.85
