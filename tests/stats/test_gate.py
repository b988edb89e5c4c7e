"""The gate's decision: examples, exact false-alarm rate on tiny designs, a Monte Carlo
check of the A/A false-alarm rate, and speed."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace

import numpy as np
import pytest

from stats.design import fixed_design_trials, simulate_design
from stats.gate import block_attainable, gate_decide, no_top_up, trials_to_attain
from stats.sequential import CaseLooks, TopUpPlan


def looks(base, head, n=5):
    return [CaseLooks((b,), (n,), (h,), (n,)) for b, h in zip(base, head, strict=True)]


def seed_example():
    """12 cases x 5 trials; three cases 5/5 -> 0/5; overall 88% -> 67%."""
    return looks([5] * 3 + [4] * 7 + [5] * 2, [0] * 3 + [4] * 5 + [5] * 4)


def test_the_seed_example_blocks_on_three_significant_cases():
    decision = gate_decide(cases=seed_example(), plan=no_top_up())
    assert decision.verdict == "block" and decision.exit_code == 1 and decision.final
    assert decision.drops == (0, 1, 2)
    assert [c.status for c in decision.cases[:3]] == ["drop"] * 3
    assert decision.cases[0].adjusted == pytest.approx(3 / 252)
    assert decision.suite_p < 0.01
    assert "3 case(s) dropped significantly" in decision.reason


def test_one_flaky_case_that_passed_every_base_trial_does_not_block():
    """The rule this gate replaces ("broken": base all pass, head any fail) blocked this."""
    decision = gate_decide(cases=looks([5] * 30, [5] * 29 + [4]), plan=no_top_up())
    assert decision.verdict == "pass" and decision.exit_code == 0
    assert decision.suspects == (29,)


def test_a_suite_that_never_fails_passes_with_nothing_to_top_up():
    decision = gate_decide(cases=looks([5] * 12, [5] * 12), plan=TopUpPlan())
    assert decision.verdict == "pass" and decision.next_round == {}
    assert {c.status for c in decision.cases} == {"clean"}


def test_suspects_are_topped_up_on_both_sides_when_the_base_can_be_replayed():
    cases = looks([5, 5, 4, 3], [4, 5, 4, 3])
    replayed = gate_decide(cases=cases, plan=TopUpPlan())
    assert replayed.verdict == "undecided" and not replayed.final
    assert replayed.next_round == {0: (5, 5)} and replayed.next_look == 1
    head_only = gate_decide(cases=cases, plan=TopUpPlan(base_replayed=False))
    assert head_only.next_round == {0: (0, 5)}


def test_a_top_up_that_confirms_the_drop_blocks_and_one_that_clears_it_passes():
    plan = TopUpPlan()
    confirmed = looks([5, 5, 5], [2, 5, 5])
    confirmed[0] = CaseLooks((5, 5), (5, 5), (2, 0), (5, 5))
    first = gate_decide(cases=confirmed, plan=plan)
    assert first.verdict == "block" and first.looks[-1].look == 1
    assert first.cases[0].status == "drop"
    cleared = looks([5, 5, 5], [2, 5, 5])
    cleared[0] = CaseLooks((5, 2), (5, 5), (2, 5), (5, 5))  # 7/10 each after round 1
    second = gate_decide(cases=cleared, plan=plan)
    assert second.verdict == "pass" and second.cases[0].status == "cleared"


def test_capability_suites_have_no_per_case_family():
    decision = gate_decide(cases=seed_example(), plan=no_top_up(suite_kind="capability"))
    assert decision.looks[0].adjusted is None and decision.drops == ()
    assert decision.verdict == "block" and "suite's pass rate dropped" in decision.reason


def test_it_refuses_trials_the_rule_did_not_ask_for():
    cases = looks([5, 5], [5, 3])
    cases[0] = CaseLooks((5, 5), (5, 5), (5, 5), (5, 5))  # not a suspect at look 0
    with pytest.raises(ValueError):
        gate_decide(cases=cases, plan=TopUpPlan())
    with pytest.raises(ValueError):
        gate_decide(cases=[], plan=TopUpPlan())
    with pytest.raises(ValueError):
        gate_decide(cases=[CaseLooks((5, 5), (5, 5), (3, 3), (5, 5))], plan=no_top_up())


def _pmf(k, n, p):
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def exact_block_rate(rates, n, plan):
    """P(block) under the null by enumerating every outcome of every look."""
    total = 0.0

    def follow(state, prob):
        nonlocal total
        decision = gate_decide(cases=[CaseLooks(*map(tuple, s)) for s in state], plan=plan)
        if decision.verdict == "block":
            total += prob
        if decision.verdict != "undecided":
            return
        items = sorted(decision.next_round.items())
        choices = [
            [(db, dh) for db in range(mb + 1) for dh in range(mh + 1)] for _, (mb, mh) in items
        ]
        for combo in itertools.product(*choices):
            pr = prob
            new = [[list(x) for x in s] for s in state]
            for (i, (mb, mh)), (db, dh) in zip(items, combo, strict=True):
                pr *= _pmf(db, mb, rates[i]) * _pmf(dh, mh, rates[i])
                for side, value in enumerate((db, mb, dh, mh)):
                    new[i][side].append(value)
            follow(new, pr)

    outcomes = [[(b, h) for b in range(n + 1) for h in range(n + 1)] for _ in rates]
    for outcome in itertools.product(*outcomes):
        pairs = zip(outcome, rates, strict=True)
        prob = math.prod(_pmf(b, n, r) * _pmf(h, n, r) for (b, h), r in pairs)
        follow([[[b], [n], [h], [n]] for b, h in outcome], prob)
    return total


@pytest.mark.parametrize("kind", ["regression", "capability"])
@pytest.mark.parametrize("replayed", [True, False])
@pytest.mark.parametrize("rates", [(0.5, 0.5), (0.3, 0.9)])
def test_the_exact_false_alarm_rate_of_a_tiny_design_is_at_most_alpha(kind, replayed, rates):
    """Two cases, 2 trials, rounds of 1 and 2 trials, alpha 0.4 (so that tiny samples can
    reject at all): every outcome enumerated."""
    plan = TopUpPlan(
        alpha=0.4,
        first_trials=2,
        round_sizes=(1, 2),
        alpha_first=0.2,
        base_replayed=replayed,
        suite_kind=kind,
    )
    rate = exact_block_rate(rates, 2, plan)
    assert 0 < rate <= 0.4


A_A_CELLS = [
    ("regression", 30, 5, "uniform", TopUpPlan(first_trials=5)),
    ("regression", 12, 3, 0.9, no_top_up()),
    ("capability", 30, 5, 0.95, TopUpPlan(first_trials=5, suite_kind="capability")),
    ("regression", 30, 5, 0.9, TopUpPlan(first_trials=5, base_replayed=False)),
]


@pytest.mark.parametrize("kind, cases, trials, rate, plan", A_A_CELLS)
def test_the_a_a_false_alarm_rate_is_not_clearly_above_alpha(kind, cases, trials, rate, plan):
    """Monte Carlo (250 seeded comparisons of a pipeline with itself): fails above 9%,
    about 3.2 standard errors above 5%. The full grid: ``bench/bench_gate.py``."""

    plan = replace(plan, first_trials=trials, suite_kind=kind)
    rng = np.random.default_rng(7)
    rates = rng.uniform(0, 1, cases) if rate == "uniform" else np.full(cases, rate)
    result = simulate_design(base_rates=rates, head_rates=rates, plan=plan, n_sim=250, seed=3)
    assert result.power <= 0.09


def test_a_100_case_decision_takes_well_under_50_ms():
    rng = np.random.default_rng(1)
    rates = rng.uniform(0, 1, 100)
    cases = looks(rng.binomial(5, rates).tolist(), rng.binomial(5, rates).tolist())
    gate_decide(cases=cases, plan=TopUpPlan())  # warm the caches and imports
    cases = looks(rng.binomial(5, rates).tolist(), rng.binomial(5, rates).tolist())
    start = time.perf_counter()
    gate_decide(cases=cases, plan=TopUpPlan())
    gate_decide(cases=cases, plan=no_top_up())
    assert (time.perf_counter() - start) / 2 < 0.05


def test_a_fixed_design_of_the_same_power_needs_more_trials_than_top_up():
    rates = np.full(30, 0.95)
    rates[0] = 1.0
    head = rates.copy()
    head[0] = 0.5
    adaptive = simulate_design(base_rates=rates, head_rates=head, plan=TopUpPlan(), n_sim=100)
    fixed = fixed_design_trials(
        base_rates=rates, head_rates=head, target_power=adaptive.power, n_sim=100
    )
    assert fixed.trials_per_side is not None and fixed.power >= adaptive.power
    assert fixed.trials > adaptive.trials


# --- attainability: a pass is only a pass when some head could have been blocked ----------


def test_a_collapse_of_three_cases_at_one_trial_cannot_be_blocked_without_top_up():
    collapse = looks([1, 1, 1], [0, 0, 0], n=1)
    plan = no_top_up()
    assert gate_decide(cases=collapse, plan=plan).verdict == "pass"
    assert not block_attainable(cases=collapse, plan=plan)
    assert trials_to_attain(cases=collapse, plan=plan, max_trials=50) == 2
    assert block_attainable(cases=looks([1] * 10, [0] * 10, n=2), plan=plan)


def test_a_base_that_passed_nothing_leaves_nothing_to_attain():
    nothing = looks([0, 0, 0], [0, 0, 0], n=3)
    assert not block_attainable(cases=nothing, plan=no_top_up())
    assert trials_to_attain(cases=nothing, plan=no_top_up(), max_trials=50) is None


@pytest.mark.parametrize("kind", ["regression", "capability"])
def test_attainability_agrees_with_every_head_outcome_of_small_designs(kind):
    # Brute force: a design can block iff some head outcome (every vector of head passes)
    # blocks; and trials_to_attain is the smallest N' that can.
    plan = no_top_up(suite_kind=kind)
    for n_cases in (1, 2, 3):
        for n in (1, 2, 3):
            for base in itertools.product(range(n + 1), repeat=n_cases):
                if sum(base) == 0:
                    continue
                outcomes = itertools.product(range(n + 1), repeat=n_cases)
                some = any(
                    gate_decide(cases=looks(list(base), list(h), n=n), plan=plan).verdict == "block"
                    for h in outcomes
                )
                cases = looks(list(base), [0] * n_cases, n=n)
                assert block_attainable(cases=cases, plan=plan) == some, (base, n)
            need = trials_to_attain(
                cases=looks([n] * n_cases, [0] * n_cases, n=n), plan=plan, max_trials=8
            )
            if need is not None:
                assert block_attainable(
                    cases=looks([need] * n_cases, [0] * n_cases, n=need), plan=plan
                )
                below = need - 1
                assert below <= n or not block_attainable(
                    cases=looks([below] * n_cases, [0] * n_cases, n=below), plan=plan
                )
