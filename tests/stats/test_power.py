"""The smallest detectable drop: against a brute-force simulation with the real test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from stats.compare import stratified_permutation_test
from stats.power import (
    _binomial_from_uniforms,
    min_detectable_drop,
    power_at_drop,
    stratified_rejects,
)

RATES = [0.9, 0.8, 1.0, 0.7, 0.95, 0.6, 1.0, 0.85, 0.9, 0.75, 1.0, 0.8]


def brute_force_power(rates, trials, drop, *, n_sim=300, alpha=0.05, seed=5):
    """Simulate runs and apply the exact stratified permutation test to every pair."""
    rng = np.random.default_rng(seed)
    r = np.asarray(rates)
    head_rates = r * (1 - drop / r.mean())
    rejected = 0
    for _ in range(n_sim):
        b = rng.binomial(trials, r)
        h = rng.binomial(trials, head_rates)
        base = [[True] * k + [False] * (trials - k) for k in b]
        head = [[True] * k + [False] * (trials - k) for k in h]
        rejected += stratified_permutation_test(base, head).p_value < alpha
    return rejected / n_sim


@pytest.mark.parametrize("drop", [0.1, 0.2, 0.3])
def test_its_power_matches_a_brute_force_simulation_with_the_exact_test(drop):
    fast = power_at_drop(RATES, 5, drop, n_sim=2000, seed=1)
    slow = brute_force_power(RATES, 5, drop)
    # 300 brute-force draws: standard error <= 0.029; allow the normal approximation 0.1.
    assert abs(fast - slow) < 0.1


def test_its_drop_is_where_the_brute_force_power_crosses_80_percent():
    result = min_detectable_drop(RATES, 5)
    assert result.power >= 0.8
    assert brute_force_power(RATES, 5, result.drop) >= 0.7
    assert brute_force_power(RATES, 5, max(result.drop - 0.05, 0.0)) < 0.8


def test_more_cases_detect_smaller_drops():
    small = min_detectable_drop(RATES, 5).drop
    large = min_detectable_drop(RATES * 10, 5).drop
    assert large < small


def test_it_is_seeded_and_repeatable():
    assert min_detectable_drop(RATES, 5, seed=3) == min_detectable_drop(RATES, 5, seed=3)


def test_a_tiny_suite_detects_nothing_and_says_why():
    result = min_detectable_drop([0.5, 0.5, 0.5], 1)
    assert result.drop is None
    assert "below 80%" in result.reason


def test_it_refuses_bad_input():
    with pytest.raises(ValueError, match="no cases"):
        min_detectable_drop([], 5)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        min_detectable_drop([1.2], 5)
    with pytest.raises(ValueError, match="trials_per_case"):
        min_detectable_drop([0.5], 0)


@pytest.mark.parametrize("trials", [1, 2, 5, 12])
def test_its_binomial_counts_and_null_variances_equal_the_whole_array_formulas(trials):
    # The simulation counts passes one trial index at a time and looks the per-case null
    # variance up by pooled passes; both must give exactly what the direct formulas give
    # on the full (simulations x cases x trials) array (same counts, same floats, so the
    # same detectable drop to the last bit).
    rng = np.random.default_rng(trials)
    rates = np.concatenate([[0.0, 1.0, 0.5], rng.random(37)])
    u = rng.random((60, rates.size), dtype=np.float32)
    cdf = binom.cdf(np.arange(trials)[None, :], trials, rates[:, None]).astype(np.float32)
    direct = (u[:, :, None] > cdf[None, :, :]).sum(axis=2, dtype=np.int32)
    base = _binomial_from_uniforms(u, trials, rates)
    assert base.dtype == np.int32 and np.array_equal(base, direct)

    head = _binomial_from_uniforms(rng.random(u.shape, dtype=np.float32), trials, rates * 0.8)
    n, c = float(trials), rates.size
    p = (base + head).astype(np.float64) / (2 * n)
    var_t = (4.0 / (n * n)) * (n * p * (1 - p) * n / (2 * n - 1)).sum(axis=1) / (c * c)
    t = (head - base).sum(axis=1) / (n * c)
    expected = (var_t > 0) & (np.abs(t) - 1.0 / (n * c) >= 1.96 * np.sqrt(var_t) - 1e-12)
    assert np.array_equal(stratified_rejects(base, head, trials, 1.96), expected)
