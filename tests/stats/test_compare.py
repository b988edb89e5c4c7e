"""The comparison statistics against brute force, scipy, and the faults file (D2)."""

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from stats.compare import (
    case_intervals_from_counts,
    clustered_paired_interval,
    stratified_permutation_test,
    within_case_interval,
    within_case_interval_from_counts,
)

outcomes = st.lists(st.booleans(), min_size=1, max_size=4)
paired_suites = st.integers(min_value=1, max_value=5).flatmap(
    lambda n: st.tuples(
        st.lists(outcomes, min_size=n, max_size=n), st.lists(outcomes, min_size=n, max_size=n)
    )
)


def brute_force_p(base, head):
    """Enumerate every within-case relabeling (the definition of the test).

    Each case's relabelings are enumerated one by one; the cases are then combined by
    counting (relabelings of different cases are independent and equally likely), so the
    cost is the sum, not the product, of the cases' relabeling counts times the number of
    distinct sums: bounded whatever hypothesis draws."""
    observed = np.mean([np.mean(h) - np.mean(b) for b, h in zip(base, head, strict=False)])
    counts = {0.0: 1}
    total = 1
    for b, h in zip(base, head, strict=False):
        pooled = list(b) + list(h)
        m, nh = len(pooled), len(h)
        values = []
        for head_idx in itertools.combinations(range(m), nh):
            hs = [pooled[i] for i in head_idx]
            bs = [pooled[i] for i in range(m) if i not in head_idx]
            values.append(np.mean(hs) - np.mean(bs))
        merged = {}
        for acc, n_acc in counts.items():
            for v in values:
                key = round(acc + v, 9)
                merged[key] = merged.get(key, 0) + n_acc
        counts = merged
        total *= len(values)
    extreme = sum(n for s, n in counts.items() if abs(s / len(base)) >= abs(observed) - 1e-9)
    return extreme / total


def enumeration_size(suites) -> int:
    """How many relabelings ``brute_force_p`` visits: the product over cases of C(m, n_head)."""
    return math.prod(math.comb(len(b) + len(h), len(h)) for b, h in zip(*suites, strict=True))


# Up to 70^5 ≈ 1.7e9 relabelings otherwise: some draws ran for minutes. 5,000 (≈ 30 ms each)
# bounds the test at a few seconds and still reaches 5 cases (of fewer trials).
brute_forceable_suites = paired_suites.filter(lambda s: enumeration_size(s) <= 5_000)


def test_all_fail_to_all_pass_on_ten_cases_has_exact_p_2_over_1024():
    base, head = [[False]] * 10, [[True]] * 10
    result = stratified_permutation_test(base, head)
    assert result.exact
    assert result.delta == 1.0
    assert result.p_value == 2 / 1024


def test_the_reversed_runs_have_the_same_exact_p():
    result = stratified_permutation_test([[True]] * 10, [[False]] * 10)
    assert result.delta == -1.0
    assert result.p_value == 2 / 1024


@pytest.mark.parametrize("m, floor", [(9, 0.1), (999, 0.001)])
@pytest.mark.parametrize("seed", range(20))
def test_a_monte_carlo_p_value_is_never_below_one_over_m_plus_one(m, floor, seed):
    result = stratified_permutation_test(
        [[False]] * 10, [[True]] * 10, n_resamples=m, seed=seed, method="monte-carlo"
    )
    assert not result.exact
    assert result.p_value >= floor


def test_a_suite_where_nothing_can_change_gives_p_one():
    suite = [[True, True], [False, False, False]]
    assert stratified_permutation_test(suite, suite).p_value == 1.0
    assert stratified_permutation_test(suite, suite, method="monte-carlo").p_value == 1.0


@settings(max_examples=60, deadline=None)
@given(brute_forceable_suites)
def test_the_exact_p_value_equals_brute_force_enumeration(suites):
    base, head = suites
    result = stratified_permutation_test(base, head)
    assert result.exact
    assert result.p_value == pytest.approx(brute_force_p(base, head), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(paired_suites)
def test_swapping_base_and_head_negates_delta_and_keeps_p(suites):
    base, head = suites
    forward = stratified_permutation_test(base, head)
    backward = stratified_permutation_test(head, base)
    assert backward.delta == pytest.approx(-forward.delta)
    assert backward.p_value == pytest.approx(forward.p_value)
    assert 0 < forward.p_value <= 1


def test_one_trial_a_side_matches_scipy_paired_permutation_test():
    rng = np.random.default_rng(3)
    base = rng.random(12) < 0.5
    head = rng.random(12) < 0.8
    ours = stratified_permutation_test([[b] for b in base], [[h] for h in head])
    reference = sps.permutation_test(
        (head.astype(float), base.astype(float)),
        lambda x, y: np.mean(x - y),
        permutation_type="samples",
        n_resamples=math.inf,
        alternative="two-sided",
    )
    assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-9)


def collapse_example():
    """12 cases × 5 trials: three cases go from 5/5 to 0/5; overall 88.3% → 66.7%."""
    base = [[True] * 5] * 3 + [[True] * 4 + [False]] * 7 + [[True] * 5] * 2
    head = [[False] * 5] * 3 + [[True] * 4 + [False]] * 5 + [[True] * 5] * 4
    return base, head


def test_a_collapse_of_three_cases_is_significant_at_005():
    base, head = collapse_example()
    assert np.mean([np.mean(c) for c in base]) == pytest.approx(53 / 60)
    assert np.mean([np.mean(c) for c in head]) == pytest.approx(40 / 60)
    result = stratified_permutation_test(base, head)
    assert result.p_value < 0.05
    low, high = within_case_interval(base, head)
    assert high < 0
    # Newcombe's hybrid score interval of 40/60 - 53/60 (12 cases x 5 trials: n_K = 60)
    # the MOVER of the Clopper-Pearson intervals of 40/60 and 53/60
    assert (low, high) == pytest.approx(_mover_clopper_pearson(40, 53, 60), abs=1e-9)


def test_the_monte_carlo_and_exact_p_values_agree():
    base, head = collapse_example()
    exact = stratified_permutation_test(base, head)
    mc = stratified_permutation_test(base, head, n_resamples=20_000, seed=7, method="monte-carlo")
    assert abs(mc.p_value - exact.p_value) < 0.005


def test_the_within_case_interval_contains_the_observed_delta():
    rng = np.random.default_rng(11)
    base = [list(rng.random(5) < p) for p in rng.random(30)]
    head = [list(rng.random(5) < p) for p in rng.random(30)]
    delta = np.mean([np.mean(h) - np.mean(b) for b, h in zip(base, head, strict=False)])
    low, high = within_case_interval(base, head)
    assert -1 <= low < delta < high <= 1


def _mover_clopper_pearson(x_h: float, x_b: float, n: float) -> tuple[float, float]:
    """The within-case interval written out for x_h of n head trials and x_b of n base
    trials: the union of the MOVER of Clopper-Pearson limits (scipy beta quantiles) and the
    Agresti-Caffo interval (one success and one failure added a side)."""

    def cp(x: int) -> tuple[float, float]:
        low = 0.0 if x == 0 else sps.beta.ppf(0.025, x, n - x + 1)
        high = 1.0 if x == n else sps.beta.ppf(0.975, x + 1, n - x)
        return low, high

    (l_h, u_h), (l_b, u_b) = cp(x_h), cp(x_b)
    m_h, m_b = x_h / n, x_b / n
    d = m_h - m_b
    a_h, a_b = (x_h + 1) / (n + 2), (x_b + 1) / (n + 2)
    half = 1.959963984540054 * math.sqrt((a_h * (1 - a_h) + a_b * (1 - a_b)) / (n + 2))
    low = min(d - math.hypot(m_h - l_h, u_b - m_b), a_h - a_b - half)
    high = max(d + math.hypot(u_h - m_h, m_b - l_b), a_h - a_b + half)
    return max(-1.0, low), min(1.0, high)


def test_the_within_case_interval_is_the_mover_of_clopper_pearson_limits_on_pooled_trials():
    """Equal trial counts: the Kish count is the trial total, so the interval is the MOVER
    of the two sides' Clopper-Pearson intervals of the pooled counts."""
    rng = np.random.default_rng(3)
    for n_cases, trials in [(3, 1), (5, 3), (12, 5), (30, 10)]:
        base = [list(rng.random(trials) < p) for p in rng.random(n_cases)]
        head = [list(rng.random(trials) < p) for p in rng.random(n_cases)]
        expected = _mover_clopper_pearson(int(np.sum(head)), int(np.sum(base)), n_cases * trials)
        assert within_case_interval(base, head) == pytest.approx(expected, abs=1e-9)


def test_the_within_case_interval_weighs_cases_alike_with_unequal_trial_counts():
    """A topped-up case (10 trials) counts once in the mean, and the Kish count
    (C² / Σ 1/n_i = 9 / 0.6 = 15 trials a side) sets the width."""
    base = [[True] * 4, [True] * 4, [True] * 10]
    head = [[True] * 4, [True, False, True, False], [True] * 5 + [False] * 5]
    low, high = within_case_interval(base, head)
    delta = (1 + 0.5 + 0.5) / 3 - 1
    assert low < delta < high
    expected = _mover_clopper_pearson(10, 15, 15)  # m·n_K = (2/3)·15 = 10 head successes
    assert (low, high) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "base, head, delta",
    [
        ([[True] * 5] * 12, [[False] * 5] * 12, -1.0),  # every case 5/5 -> 0/5
        ([[False] * 5] * 12, [[True] * 5] * 12, 1.0),
        ([[True] * 5] * 12, [[True] * 5] * 12, 0.0),  # all pass on both sides
        ([[False] * 10] * 30, [[False] * 10] * 30, 0.0),  # all fail, 300 trials a side
        ([[True]] * 3, [[False]] * 3, -1.0),  # one trial per case
        ([[True], [False], [True]], [[True], [False], [True]], 0.0),
        ([[True, True]], [[False, False]], -1.0),  # one case
    ],
)
def test_the_within_case_interval_is_never_of_zero_width(base, head, delta):
    low, high = within_case_interval(base, head)
    assert -1.0 <= low <= delta <= high <= 1.0
    assert high - low > 0.005


@given(paired_suites)
@settings(max_examples=200, deadline=None)
def test_the_within_case_interval_holds_the_estimate_with_positive_width(suites):
    base, head = suites
    delta = np.mean([np.mean(h) - np.mean(b) for b, h in zip(base, head, strict=True)])
    low, high = within_case_interval(base, head)
    assert -1.0 <= low <= delta + 1e-12 and delta - 1e-12 <= high <= 1.0
    assert low < high
    narrow_low, narrow_high = within_case_interval(base, head, confidence=0.8)
    assert low <= narrow_low + 1e-12 and narrow_high <= high + 1e-12


def test_the_clustered_interval_uses_the_standard_error_of_paired_differences():
    rng = np.random.default_rng(5)
    # half the cases drop from 0.9 to 0.2: the spread between cases dominates
    base = [list(rng.random(4) < 0.9) for _ in range(25)]
    head = [list(rng.random(4) < p) for p in np.where(np.arange(25) % 2 == 0, 0.9, 0.2)]
    d = np.array([np.mean(h) - np.mean(b) for b, h in zip(base, head, strict=False)])
    interval = clustered_paired_interval(base, head)
    se = sps.sem(d)
    assert interval.estimate == pytest.approx(d.mean())
    # t on 24 df (scipy) here wider than the within-case interval, which it contains
    assert interval.high - interval.estimate == pytest.approx(sps.t.ppf(0.975, 24) * se)
    assert interval.estimate - interval.low == pytest.approx(sps.t.ppf(0.975, 24) * se)
    low, high = within_case_interval(base, head)
    assert interval.low <= low and high <= interval.high


def test_the_clustered_interval_is_never_of_zero_width_when_every_case_moved_alike():
    """Every case 5/5 -> 0/5: the differences have no spread (sd 0); the interval falls
    back on the trials' own randomness, never [-100, -100] points."""
    base, head = [[True] * 5] * 12, [[False] * 5] * 12
    interval = clustered_paired_interval(base, head)
    assert interval.low == -1.0 and interval.high > -0.99
    assert (interval.low, interval.high) == within_case_interval(base, head)


def test_the_clustered_interval_is_undefined_for_one_case():
    interval = clustered_paired_interval([[True]], [[False]])
    assert interval.low is None and interval.high is None
    assert "one case" in interval.reason


@pytest.mark.parametrize(
    "base, head, message",
    [
        ([[True]], [[True], [False]], "pair them by case"),
        ([], [], "no cases"),
        ([[True], []], [[True], [True]], "position 1"),
    ],
)
def test_it_refuses_unpaired_or_empty_input(base, head, message):
    with pytest.raises(ValueError, match=message):
        stratified_permutation_test(base, head)


# stratified_drop_test: the one-sided test from counts (what the gate runs).

from stats.compare import stratified_drop_test  # noqa: E402

# At most 3 cases of at most 3 + 3 trials: at most C(6, 3)³ = 8,000 relabelings to enumerate.
count_suites = st.integers(min_value=1, max_value=3).flatmap(
    lambda c: st.lists(
        st.tuples(st.integers(1, 3), st.integers(1, 3)).flatmap(
            lambda n: st.tuples(
                st.integers(0, n[0]), st.just(n[0]), st.integers(0, n[1]), st.just(n[1])
            )
        ),
        min_size=c,
        max_size=c,
    )
)


def drop_kwargs(cases):
    b, nb, h, nh = zip(*cases, strict=True)
    return {"base_passed": b, "base_graded": nb, "head_passed": h, "head_graded": nh}


def brute_drop_law(cases):
    """Every within-case relabeling: (statistic Σ head passes, probability)."""
    per_case = []
    for b, nb, h, nh in cases:
        pooled = [True] * (b + h) + [False] * (nb + nh - b - h)
        m = len(pooled)
        combos = list(itertools.combinations(range(m), nh))
        per_case.append([sum(pooled[i] for i in idx) for idx in combos])
    law = {}
    for combo in itertools.product(*per_case):
        weight = 1.0 / math.prod(len(x) for x in per_case)
        law[sum(combo)] = law.get(sum(combo), 0.0) + weight
    return law


@settings(max_examples=60, deadline=None)
@given(count_suites)
def test_the_drop_test_equals_enumerating_every_relabeling(cases):
    result = stratified_drop_test(**drop_kwargs(cases))
    law = brute_drop_law(cases)
    observed = sum(c[2] for c in cases)
    assert result.statistic == observed
    assert result.p_value == pytest.approx(sum(p for s, p in law.items() if s <= observed))
    for u in result.support:
        exact = sum(
            p for s, p in law.items() if sum(q for t, q in law.items() if t <= s) <= u * (1 + 1e-9)
        )
        assert result.size_at(u) == pytest.approx(exact, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda c: st.tuples(
            st.integers(1, 4),
            st.integers(1, 4),
            st.lists(st.floats(0, 1), min_size=c, max_size=c),
            st.integers(0, 2**31),
        )
    )
)
def test_with_equal_trial_counts_it_is_the_one_sided_permutation_test(args):
    nb, nh, rates, seed = args
    rng = np.random.default_rng(seed)
    b = [int(rng.binomial(nb, r)) for r in rates]
    h = [int(rng.binomial(nh, r)) for r in rates]
    base = [[True] * x + [False] * (nb - x) for x in b]
    head = [[True] * x + [False] * (nh - x) for x in h]
    ours = stratified_drop_test(
        base_passed=b, base_graded=[nb] * len(b), head_passed=h, head_graded=[nh] * len(h)
    )
    reference = stratified_permutation_test(base, head, alternative="less")
    assert ours.p_value == pytest.approx(reference.p_value, rel=1e-9)
    assert ours.delta == pytest.approx(reference.delta)


def test_the_drop_test_of_the_collapse_example_is_significant_and_fast():

    base, head = collapse_example()
    counts = {
        "base_passed": [sum(c) for c in base],
        "base_graded": [len(c) for c in base],
        "head_passed": [sum(c) for c in head],
        "head_graded": [len(c) for c in head],
    }
    result = stratified_drop_test(**counts)
    assert result.p_value < 0.01
    rng = np.random.default_rng(0)
    big = {
        "base_passed": rng.binomial(5, 0.9, 100),
        "base_graded": rng.integers(3, 6, 100),
        "head_passed": rng.binomial(3, 0.9, 100),
        "head_graded": [5] * 100,
    }
    big["base_passed"] = np.minimum(big["base_passed"], big["base_graded"])
    stratified_drop_test(**big)
    start = time.perf_counter()
    stratified_drop_test(**big)
    assert time.perf_counter() - start < 0.05


def test_the_drop_test_refuses_unpaired_or_empty_input():
    with pytest.raises(ValueError):
        stratified_drop_test(base_passed=[], base_graded=[], head_passed=[], head_graded=[])
    with pytest.raises(ValueError):
        stratified_drop_test(base_passed=[1], base_graded=[0], head_passed=[0], head_graded=[1])
    with pytest.raises(ValueError):
        stratified_drop_test(base_passed=[1, 1], base_graded=[2], head_passed=[0], head_graded=[1])


@pytest.mark.parametrize("g", [1, 2, 3, 7, 64, 1000])
def test_the_sum_of_g_iid_draws_is_the_pmf_convolved_g_times(g):
    """``_iid_sum_pmf`` (squaring; FFT for the large products at g = 1000) against g − 1
    direct convolutions of a hypergeometric pmf."""
    from stats.compare import _iid_sum_pmf, _pmf  # noqa: PLC0415

    pmf = np.asarray(_pmf(5, 5, 5)[1])
    brute = pmf
    for _ in range(g - 1):
        brute = np.convolve(brute, pmf)
    got = _iid_sum_pmf(pmf, g)
    assert got.shape == brute.shape == (5 * g + 1,)
    assert np.allclose(got, brute, rtol=0, atol=1e-14)
    assert got.min() >= 0 and got.sum() == pytest.approx(1, abs=1e-12)


def test_the_grouped_monte_carlo_null_matches_the_exact_one_at_2000_cases():
    """At 2,000 cases of 5 trials a side (the Monte Carlo path the comparison page takes),
    the p-value is within 4 Monte Carlo standard errors of the exact one, at several seeds
    and effect sizes."""
    rng = np.random.default_rng(20261202)
    for shift in (0.006, -0.008, -0.014):  # exact p about 0.52, 0.06, 0.20
        rates = rng.choice([1.0, 1.0, 0.9, 0.7, 0.4], size=2000)
        base = [list(rng.random(5) < p) for p in rates]
        head = [list(rng.random(5) < min(1.0, max(0.0, p + shift))) for p in rates]
        exact = stratified_permutation_test(base, head, method="exact").p_value
        for seed in (0, 1):
            mc = stratified_permutation_test(
                base, head, n_resamples=10_000, seed=seed, method="monte-carlo"
            )
            se = math.sqrt(exact * (1 - exact) / 10_000)
            assert abs(mc.p_value - exact) < 4 * se, (shift, seed, mc.p_value, exact)


def test_per_case_intervals_are_the_within_case_interval_of_each_case_alone():
    rows = [
        (nb, sb, nh, sh)
        for nb in (1, 2, 3, 5, 8)
        for sb in range(nb + 1)
        for nh in (1, 4, 5)
        for sh in range(nh + 1)
    ]
    a = np.array(rows)
    for confidence in (0.9, 0.95):
        low, high = case_intervals_from_counts(*a.T, confidence=confidence)
        for (nb, sb, nh, sh), lo, hi in zip(rows, low, high, strict=True):
            one = within_case_interval_from_counts(
                np.array([nb]),
                np.array([sb]),
                np.array([nh]),
                np.array([sh]),
                confidence=confidence,
            )
            assert (lo, hi) == pytest.approx(one, abs=1e-12)
            assert -1 <= lo < sh / nh - sb / nb + 1e-12 and sh / nh - sb / nb - 1e-12 < hi <= 1


@pytest.mark.parametrize(
    ("counts", "confidence"),
    [(([0], [0], [3], [1]), 0.95), (([3], [4], [3], [1]), 0.95), (([3], [1], [3], [1]), 1.0)],
)
def test_per_case_intervals_refuse_an_empty_case_impossible_counts_or_confidence(
    counts, confidence
):
    with pytest.raises(ValueError):
        case_intervals_from_counts(*(np.array(c) for c in counts), confidence=confidence)
