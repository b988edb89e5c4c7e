"""The best set of an experiment: brute force, its level, invariances, edge cells."""

from itertools import product
from math import comb

import numpy as np
import pytest

import stats.best_set as best_set_module
from stats.best_set import best_set, drop_p_value, passk_drop_p_value
from stats.compare import stratified_drop_test


def draw(rates, cases=30, trials=5, seed=0):
    rng = np.random.default_rng(seed)
    rates = np.asarray(rates, dtype=float)
    if rates.ndim == 1:
        rates = np.repeat(rates[:, None], cases, axis=1)
    graded = np.full(rates.shape, trials, dtype=np.int64)
    return rng.binomial(graded, rates).astype(np.int64), graded


def brute_force_set(passed, graded, alpha):
    """The rule from its definition: out when some rival's exact test is at alpha/(V-1)."""
    v = passed.shape[0]
    keep = []
    for b in range(v):
        ps = [
            stratified_drop_test(
                base_passed=passed[j],
                base_graded=graded[j],
                head_passed=passed[b],
                head_graded=graded[b],
            ).p_value
            for j in range(v)
            if j != b
        ]
        if min(ps) > alpha / (v - 1):
            keep.append(b)
    return tuple(keep)


@pytest.mark.parametrize("seed", range(6))
def test_the_set_is_the_rule_applied_by_brute_force(seed):
    rng = np.random.default_rng(seed)
    v = int(rng.integers(2, 6))
    passed, graded = draw(rng.uniform(0.4, 0.95, size=v), cases=int(rng.integers(3, 25)), seed=seed)
    result = best_set(passed, graded)
    assert result.in_set_indices() == brute_force_set(passed, graded, 0.05)
    assert result.level == pytest.approx(0.05 / (v - 1))
    for f in result.variants:
        assert f.estimate == pytest.approx(np.mean(passed[f.index] / graded[f.index]))
        if not f.in_set:
            assert f.p_value <= result.level
            assert f.beaten_by is not None and f.beaten_by != f.index
            assert f.rival == f.beaten_by
            gap = result.variants[f.beaten_by].estimate - f.estimate
            assert f.drop == pytest.approx(gap)
            assert f.drop_low <= f.drop <= f.drop_high
            assert "is out" in f.note
        else:
            assert f.beaten_by is None and f.p_value > result.level
            assert f.rival != f.index
            gap = result.variants[f.rival].estimate - f.estimate
            assert f.drop == pytest.approx(gap)


def test_all_equal_data_keeps_everything():
    passed = np.full((4, 20), 3, dtype=np.int64)
    graded = np.full((4, 20), 5, dtype=np.int64)
    result = best_set(passed, graded)
    assert result.in_set_indices() == (0, 1, 2, 3)
    assert not result.decided
    assert "would separate them" in result.reason


def test_one_far_better_is_alone():
    passed, graded = draw([0.5, 0.5, 0.98, 0.5], cases=30, seed=3)
    result = best_set(passed, graded)
    assert result.in_set_indices() == (2,)
    assert result.decided
    assert result.variants[0].beaten_by == 2
    assert result.reason.startswith("variant 2 has the best pass rate")


def test_the_bonferroni_level_keeps_a_variant_a_single_test_would_put_out():
    # Find data where the one test is between alpha/(V-1) and alpha: out at alpha, in at
    # alpha / 4 (5 variants).
    for seed in range(200):
        passed, graded = draw([0.6, 0.75, 0.6, 0.6, 0.6], cases=20, seed=seed)
        p = stratified_drop_test(
            base_passed=passed[1],
            base_graded=graded[1],
            head_passed=passed[0],
            head_graded=graded[0],
        ).p_value
        if 0.05 / 4 < p <= 0.05:
            break
    else:
        pytest.fail("no such sample")
    assert best_set(passed, graded).variants[0].p_value >= p * (1 - 1e-12)
    assert best_set(passed, graded, level=0.05).variants[0].in_set is False
    assert (0 in best_set(passed, graded).in_set_indices()) == all(
        stratified_drop_test(
            base_passed=passed[j],
            base_graded=graded[j],
            head_passed=passed[0],
            head_graded=graded[0],
        ).p_value
        > 0.0125
        for j in range(1, 5)
    )


def test_the_true_best_stays_in_at_least_1_minus_alpha_under_the_least_favourable_null():
    # All equal: the tagged best (index 0) must be kept >= 95% (Monte Carlo, 400 draws).
    kept = 0
    reps = 400
    rng = np.random.default_rng(11)
    for _ in range(reps):
        graded = np.full((3, 12), 5, dtype=np.int64)
        passed = rng.binomial(graded, 0.7).astype(np.int64)
        kept += 0 in best_set(passed, graded).in_set_indices()
    # 0.95 minus 3 standard errors
    assert kept / reps >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)


def test_permuting_variants_permutes_the_result():
    passed, graded = draw([0.5, 0.9, 0.7], cases=15, seed=5)
    order = np.array([2, 0, 1])
    a = best_set(passed, graded)
    b = best_set(passed[order], graded[order])
    assert {int(order[i]) for i in b.in_set_indices()} == set(a.in_set_indices())
    for new, old in enumerate(order):
        assert b.variants[new].estimate == a.variants[old].estimate
        assert b.variants[new].p_value == pytest.approx(a.variants[old].p_value)


def test_permuting_cases_changes_nothing():
    passed, graded = draw([0.5, 0.9, 0.7], cases=15, seed=6)
    order = np.random.default_rng(0).permutation(15)
    a = best_set(passed, graded)
    b = best_set(passed[:, order], graded[:, order])
    assert a.in_set_indices() == b.in_set_indices()
    for fa, fb in zip(a.variants, b.variants, strict=True):
        assert fa.p_value == pytest.approx(fb.p_value)
        assert fa.low == pytest.approx(fb.low)
        assert fa.drop_low == pytest.approx(fb.drop_low)


def test_swapping_passes_and_failures_reverses_the_order():
    passed, graded = draw([0.2, 0.9], cases=20, seed=7)
    assert best_set(passed, graded).in_set_indices() == (1,)
    assert best_set(graded - passed, graded).in_set_indices() == (0,)


def test_edge_cells_two_variants_one_case_all_pass_all_fail():
    one = best_set(np.array([[5], [0]]), np.array([[5], [5]]))
    assert one.in_set_indices() == (0,)
    assert one.variants[1].drop == 1.0
    assert one.variants[1].drop_low is None  # one case: no spread
    all_pass = best_set(np.full((2, 8), 5), np.full((2, 8), 5))
    assert all_pass.in_set_indices() == (0, 1)
    assert all_pass.variants[0].p_value == 1.0
    all_fail = best_set(np.zeros((3, 8), dtype=int), np.full((3, 8), 5))
    assert all_fail.in_set_indices() == (0, 1, 2)
    assert all_fail.variants[0].low == 0.0


def test_a_cell_with_no_graded_trial_drops_the_case_for_every_variant():
    passed, graded = draw([0.3, 0.9], cases=10, seed=8)
    graded[0, 4] = 0
    passed[0, 4] = 0
    result = best_set(passed, graded)
    assert result.dropped_cases == (4,)
    assert result.n_cases == 9
    assert "left out for every variant" in result.reason
    keep = [i for i in range(10) if i != 4]
    clean = best_set(passed[:, keep], graded[:, keep])
    assert [f.p_value for f in result.variants] == [f.p_value for f in clean.variants]
    with pytest.raises(ValueError, match="nothing to compare"):
        best_set(np.zeros((2, 1), dtype=int), np.array([[0], [5]]))


@pytest.mark.parametrize(
    ("passed", "graded", "message"),
    [
        ([[1, 2]], [[5, 5]], "at least 2 variants"),
        ([[6], [1]], [[5], [5]], "0 <= passed <= graded"),
        ([[1.5], [1]], [[5], [5]], "integer"),
        ([[1, 2], [1, 2]], [[5, 5]], "must be"),
    ],
)
def test_bad_input_is_refused(passed, graded, message):
    with pytest.raises(ValueError, match=message):
        best_set(np.array(passed), np.array(graded))


def test_pass_hat_k_set_and_its_test():
    passed, graded = draw([0.6, 0.95, 0.6], cases=20, seed=9)
    result = best_set(passed, graded, metric="pass_hat_k", k=2)
    assert result.metric == "pass_hat_k" and result.k == 2
    assert result.in_set_indices() == (1,)
    with pytest.raises(ValueError, match="at least 3 graded"):
        best_set(np.minimum(passed, 2), np.full_like(graded, 2), metric="pass_hat_k", k=3)


def test_passk_permutation_p_matches_brute_force_enumeration():
    # Two cases small enough to enumerate every split exactly.
    nb, nh, b, h, k = [3, 4], [3, 4], [3, 1], [1, 2], 2
    observed = sum(
        comb(h[i], k) / comb(nh[i], k) - comb(b[i], k) / comb(nb[i], k) for i in range(2)
    )
    prob = 0.0
    for ks in product(*[range(0, min(b[i] + h[i], nh[i]) + 1) for i in range(2)]):
        p = 1.0
        value = 0.0
        for i, kk in enumerate(ks):
            s = b[i] + h[i]
            if s - kk > nb[i] or s - kk < 0:
                p = 0.0
                break
            p *= comb(s, kk) * comb(nb[i] + nh[i] - s, nh[i] - kk) / comb(nb[i] + nh[i], nh[i])
            value += comb(kk, k) / comb(nh[i], k) - comb(s - kk, k) / comb(nb[i], k)
        if value <= observed + 1e-9:
            prob += p
    got = passk_drop_p_value(np.array(b), np.array(nb), np.array(h), np.array(nh), k)
    assert got == pytest.approx(prob, rel=1e-9)


def test_passk_monte_carlo_past_the_grid_agrees_with_the_exact_p(monkeypatch):
    rng = np.random.default_rng(12)
    nb, nh = rng.integers(2, 9, size=25), rng.integers(2, 9, size=25)
    b, h = rng.binomial(nb, 0.7), rng.binomial(nh, 0.55)
    exact = passk_drop_p_value(b, nb, h, nh, 2)
    monkeypatch.setattr(best_set_module, "EXACT_GRID_LIMIT", 1)
    assert passk_drop_p_value(b, nb, h, nh, 2) == pytest.approx(exact, abs=0.01)


def test_pass_hat_k_at_k_1_is_the_exact_test():
    passed, graded = draw([0.6, 0.8], cases=12, seed=10)
    exact = stratified_drop_test(
        base_passed=passed[1], base_graded=graded[1], head_passed=passed[0], head_graded=graded[0]
    ).p_value
    same = passk_drop_p_value(passed[1], graded[1], passed[0], graded[0], 1)
    assert same == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_the_grouped_drop_p_value_is_the_case_by_case_exact_test(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 40))
    nb = rng.integers(1, 8, size=c)
    nh = nb if seed % 2 else rng.integers(1, 8, size=c)
    b = rng.binomial(nb, rng.uniform(0, 1, size=c))
    h = rng.binomial(nh, rng.uniform(0, 1, size=c))
    expected = stratified_drop_test(
        base_passed=b, base_graded=nb, head_passed=h, head_graded=nh
    ).p_value
    assert drop_p_value(b, nb, h, nh) == pytest.approx(expected, rel=1e-9, abs=1e-300)
