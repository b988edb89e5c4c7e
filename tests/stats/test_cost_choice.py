"""Cost per passing trial, the cheapest variant in the best set, the Pareto front."""

import itertools

import numpy as np
import pytest

from stats.best_set import best_set
from stats.cost_choice import cheapest, cost_per_pass_interval, pareto_front


def brute_force_bootstrap(cost, passes, reps=4000, seed=0):
    """Percentile case bootstrap of Σ cost / Σ passes, one resample at a time."""
    rng = np.random.default_rng(seed)
    ratios = []
    c = len(cost)
    for _ in range(reps):
        idx = rng.integers(0, c, size=c)
        p = passes[idx].sum()
        ratios.append(np.inf if p == 0 else cost[idx].sum() / p)
    return np.quantile(ratios, [0.025, 0.975])


@pytest.mark.parametrize("seed", range(3))
def test_the_interval_agrees_with_a_case_bootstrap_on_many_cases(seed):
    rng = np.random.default_rng(seed)
    c = 200
    passes = rng.binomial(5, rng.beta(4, 2, size=c)).astype(float)
    cost = rng.gamma(2.0, 0.002, size=c) * 5 + 0.0005 * passes
    ratio, low, high = cost_per_pass_interval(cost, passes)
    assert ratio == pytest.approx(cost.sum() / passes.sum())
    b_low, b_high = brute_force_bootstrap(cost, passes)
    assert low == pytest.approx(b_low, rel=0.05)
    assert high == pytest.approx(b_high, rel=0.05)


def test_the_interval_covers_the_population_ratio():
    # Population: per case, passes ~ Bin(5, p_c), p_c ~ Beta(4, 2); cost 0.01 per trial +
    # noise. True ratio E[cost] / E[passes] = 0.05 / (5 * 2/3).
    rng = np.random.default_rng(1)
    true = 0.05 / (5 * 4 / 6)
    hits = 0
    reps = 400
    for _ in range(reps):
        p = rng.beta(4, 2, size=12)
        passes = rng.binomial(5, p).astype(float)
        cost = 0.01 * 5 * rng.gamma(4, 0.25, size=12)
        _, low, high = cost_per_pass_interval(cost, passes)
        hits += low <= true <= (np.inf if high is None else high)
    assert hits / reps >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)


def test_unbounded_and_one_case():
    ratio, low, high = cost_per_pass_interval(np.array([1.0, 1.0, 1.0]), np.array([0.0, 0.0, 3.0]))
    assert ratio == 1.0 and low == 0.0 and high is None
    assert cost_per_pass_interval(np.array([2.0]), np.array([4.0])) == (0.5, None, None)
    ratio, low, high = cost_per_pass_interval(np.zeros(4), np.full(4, 2.0))
    assert (ratio, low, high) == (0.0, 0.0, 0.0)


def test_cheapest_within_the_set_and_unknown_cost():
    graded = np.full((3, 10), 5, dtype=np.int64)
    passed = np.full((3, 10), 4, dtype=np.int64)
    passed[2] = 0  # variant 2 is out
    cost = np.array([[0.02] * 10, [0.01] * 10, [0.001] * 10])
    best = best_set(passed, graded)
    assert best.in_set_indices() == (0, 1)
    choice = cheapest(best, cost, passed, graded)
    assert choice.index == 1
    assert choice.figures[1].cost_per_trial == pytest.approx(0.01 / 5)
    assert choice.figures[1].cost_per_pass == pytest.approx(0.1 / 40)
    assert choice.figures[2].cost_per_pass is None
    assert choice.figures[2].reason == "no passing trial"
    cost[0, 3] = np.nan
    unknown = cheapest(best, cost, passed, graded)
    assert unknown.index is None
    assert "variant 0 is unknown" in unknown.reason
    assert unknown.figures[0].reason == "cost unknown for 1 of 10 cases"
    cost[0, 3] = 0.02
    cost[2, 0] = np.nan  # out of the set: does not matter
    assert cheapest(best, cost, passed, graded).index == 1


def test_cheapest_leaves_out_the_cases_best_set_left_out():
    graded = np.full((2, 4), 5, dtype=np.int64)
    passed = np.full((2, 4), 5, dtype=np.int64)
    graded[1, 0] = passed[1, 0] = 0
    cost = np.array([[100.0, 1, 1, 1], [np.nan, 2, 2, 2]])
    choice = cheapest(best_set(passed, graded), cost, passed, graded)
    assert choice.index == 0
    assert choice.figures[0].total_usd == 3.0
    assert choice.figures[1].total_usd == 6.0


def brute_force_front(q, c):
    front = []
    for i in range(len(q)):
        if c[i] is None:
            front.append(i)
            continue
        if not any(
            c[j] is not None and q[j] >= q[i] and c[j] <= c[i] and (q[j] > q[i] or c[j] < c[i])
            for j in range(len(q))
        ):
            front.append(i)
    return tuple(front)


def test_pareto_front_matches_brute_force_on_every_small_grid():
    levels = [0.1, 0.5, 0.9]
    costs = [None, 1.0, 2.0]
    for q in itertools.product(levels, repeat=3):
        for c in itertools.product(costs, repeat=3):
            assert pareto_front(q, c) == brute_force_front(q, c), (q, c)


def test_pareto_front_random_and_equal_points():
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = rng.integers(0, 4, size=6) / 4
        c = [None if rng.random() < 0.2 else float(v) for v in rng.integers(0, 4, size=6)]
        assert pareto_front(q, c) == brute_force_front(list(q), c)
    assert pareto_front([0.5, 0.5], [1.0, 1.0]) == (0, 1)  # equal points: neither dominates
    assert pareto_front([0.5, 0.5], [float("nan"), 1.0]) == (0, 1)


def test_cost_per_trial_has_the_ratio_interval_with_trials_in_place_of_passes():
    rng = np.random.default_rng(3)
    graded = np.full((2, 15), 5)
    passed = rng.binomial(graded, 0.6)
    cost = rng.uniform(0.001, 0.004, size=(2, 15)) * graded
    best = best_set(passed, graded)
    figure = cheapest(best, cost, passed, graded).figures[1]
    ratio, low, high = cost_per_pass_interval(cost[1], graded[1].astype(float))
    assert figure.cost_per_trial == pytest.approx(cost[1].sum() / graded[1].sum()) == ratio
    assert (figure.trial_low, figure.trial_high) == (low, high)
    assert figure.trial_low < figure.cost_per_trial < figure.trial_high
