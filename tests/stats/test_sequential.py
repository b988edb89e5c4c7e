"""Top-up rounds: the selective law against enumeration of every path, spending, settling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stats.compare import stratified_drop_test
from stats.discrete import drop_p_value
from stats.sequential import (
    CaseLooks,
    TopUpPlan,
    _base_law,
    _fisher_power,
    continues,
    selective_case_test,
    selective_suite_test,
    trials_to_settle,
)

FAST = settings(max_examples=25, deadline=None)


def binom_pmf(k, n, p):
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def enumerate_paths(plan, rounds, rate):
    """Every path of one case through look 0 and ``rounds`` rounds, kept while the plan's
    rule keeps it active, with its probability when both sides pass at ``rate``."""
    n = plan.first_trials
    paths = []
    for b, h in itertools.product(range(n + 1), repeat=2):
        prob = binom_pmf(b, n, rate) * binom_pmf(h, n, rate)
        paths.append((CaseLooks((b,), (n,), (h,), (n,)), prob))
    for look in range(rounds):
        m = plan.sizes[look]
        mb = m if plan.base_replayed else 0
        grown = []
        for case, prob in paths:
            if case.looks != look + 1 or not continues(case, look=look, plan=plan):
                continue
            for db, dh in itertools.product(range(mb + 1), range(m + 1)):
                pr = prob * binom_pmf(db, mb, rate) * binom_pmf(dh, m, rate)
                grown.append(
                    (
                        CaseLooks(
                            (*case.base_passed, db),
                            (*case.base_graded, mb),
                            (*case.head_passed, dh),
                            (*case.head_graded, m),
                        ),
                        pr,
                    )
                )
        paths = grown
    return paths


plans = st.builds(
    lambda n, sizes, replayed, alpha: TopUpPlan(
        alpha=alpha,
        first_trials=n,
        round_sizes=sizes,
        base_replayed=replayed,
        alpha_first=alpha / 2,
    ),
    st.integers(1, 3),
    st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple),
    st.booleans(),
    st.sampled_from([0.05, 0.3, 0.6]),
)


@FAST
@given(plans, st.floats(0.05, 0.95), st.data())
def test_the_selective_law_is_the_law_of_base_passes_given_the_total_and_the_selection(
    plan, rate, data
):
    """Enumerate every path the rule keeps to the last round: given the case's total passes,
    the share of probability at each cumulative base count is the computed law, whatever the
    true rate (the rate cancels), and the p-value is super-uniform: P(p <= u) <= u."""
    rounds = data.draw(st.integers(1, len(plan.sizes)))
    paths = enumerate_paths(plan, rounds, rate)
    assume(paths)  # tiny designs at alpha 0.05 can make every suspect futile
    by_total: dict[int, dict[int, float]] = {}
    for case, prob in paths:
        b, _, h, _ = case.cumulative(rounds)
        by_total.setdefault(b + h, {})
        by_total[b + h][b] = by_total[b + h].get(b, 0.0) + prob
    graded_b = (plan.first_trials, *((m if plan.base_replayed else 0) for m in plan.sizes))
    graded_h = (plan.first_trials, *plan.sizes)
    for total, law in by_total.items():
        mass = sum(law.values())
        b_lo, probs, _, _ = _base_law(graded_b[: rounds + 1], graded_h[: rounds + 1], total, plan)
        for b, pr in law.items():
            assert probs[b - b_lo] == pytest.approx(pr / mass, rel=1e-9, abs=1e-12)
        assert sum(probs[b - b_lo] for b in law) == pytest.approx(1.0)
    cdf: dict[float, float] = {}
    mass = sum(prob for _, prob in paths)
    for case, prob in paths:
        p = selective_case_test(case, look=rounds, plan=plan).p_value
        cdf[p] = cdf.get(p, 0.0) + prob / mass
    running = 0.0
    for p in sorted(cdf):
        running += cdf[p]
        assert running <= p * (1 + 1e-9)


@FAST
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=6))
def test_at_look_0_the_selective_tests_are_fisher_and_the_stratified_drop_test(pairs):
    plan = TopUpPlan(first_trials=4)
    cases = [CaseLooks((b,), (4,), (h,), (4,)) for b, h in pairs]
    tests = [selective_case_test(c, look=0, plan=plan) for c in cases]
    for (b, h), t in zip(pairs, tests, strict=True):
        fisher = drop_p_value(base_passed=b, base_graded=4, head_passed=h, head_graded=4)
        assert t.p_value == pytest.approx(fisher, rel=1e-9)
    suite = selective_suite_test(tests)
    b, h = zip(*pairs, strict=True)
    reference = stratified_drop_test(
        base_passed=b, base_graded=[4] * len(b), head_passed=h, head_graded=[4] * len(b)
    )
    assert suite.p_value == pytest.approx(reference.p_value, rel=1e-9)


def test_the_default_plan_spends_alpha_over_looks():
    plan = TopUpPlan(first_trials=5)
    assert plan.sizes == (5, 10)
    assert plan.cap == 20
    spending = plan.spending()
    assert spending[0] == 0.025
    assert sum(spending) == pytest.approx(0.05)
    assert spending[1] == pytest.approx(0.025 * (1 / 3) ** 1.5)
    assert TopUpPlan(round_sizes=()).spending() == (0.05,)


def test_a_suspect_continues_and_a_case_head_did_not_do_worse_on_stops():
    plan = TopUpPlan(first_trials=5)
    assert continues(CaseLooks((5,), (5,), (3,), (5,)), look=0, plan=plan)
    assert not continues(CaseLooks((4,), (5,), (4,), (5,)), look=0, plan=plan)
    assert not continues(CaseLooks((3,), (5,), (5,), (5,)), look=0, plan=plan)


def test_a_suspect_that_cannot_become_significant_is_futile():
    """Base not replayed, base 1/5, head 0/5: even 15 more failing head trials leave
    P = 5/25 = 0.2 > the rounds' 0.025."""
    plan = TopUpPlan(first_trials=5, base_replayed=False)
    assert not continues(CaseLooks((1,), (5,), (0,), (5,)), look=0, plan=plan)
    assert continues(CaseLooks((1,), (5,), (0,), (5,)), look=0, plan=TopUpPlan(first_trials=5))


def test_a_case_the_rule_did_not_select_cannot_be_tested_at_a_later_look():
    plan = TopUpPlan(first_trials=5)
    not_selected = CaseLooks((4, 5), (5, 5), (5, 0), (5, 5))
    with pytest.raises(ValueError):
        selective_case_test(not_selected, look=1, plan=plan)


def test_trials_to_settle_a_drop_from_5_of_5_to_3_of_5():
    estimate = trials_to_settle(
        base_passed=5, base_graded=5, head_passed=3, head_graded=5, level=0.016
    )
    assert estimate.trials is not None
    assert estimate.power >= 0.8
    # One trial fewer (bisection's neighbour) is short of the power.

    assert _fisher_power(estimate.trials - 1, 1.0, 0.6, 0.016) < 0.8


def test_trials_to_settle_says_so_when_head_is_not_worse_or_the_drop_is_too_small():
    same = trials_to_settle(base_passed=4, base_graded=5, head_passed=4, head_graded=5, level=0.01)
    assert same.trials is None and "not observed worse" in same.reason
    tiny = trials_to_settle(
        base_passed=99,
        base_graded=100,
        head_passed=98,
        head_graded=100,
        level=0.01,
        max_trials=50,
    )
    assert tiny.trials is None and tiny.power < 0.8


@pytest.mark.parametrize(
    "kwargs",
    [
        {"alpha": 0.0},
        {"first_trials": 0},
        {"round_sizes": (0,)},
        {"alpha_first": 0.05},
        {"suite_kind": "smoke"},
        {"case_share": 1.5},
    ],
)
def test_a_plan_refuses_nonsense(kwargs):
    with pytest.raises(ValueError):
        TopUpPlan(**kwargs)


def test_case_looks_refuse_inconsistent_counts():
    with pytest.raises(ValueError):
        CaseLooks((6,), (5,), (0,), (5,))
    with pytest.raises(ValueError):
        CaseLooks((1, 1), (5,), (0,), (5,))
    with pytest.raises(ValueError):
        CaseLooks((0,), (0,), (0,), (5,))
    assert CaseLooks((1, 2), (5, 5), (0, 3), (5, 5)).cumulative(1) == (3, 10, 3, 10)
    assert np.isfinite(
        selective_case_test(CaseLooks((5,), (5,), (0,), (5,)), look=0, plan=TopUpPlan()).p_value
    )
