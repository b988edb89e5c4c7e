"""Racing: the plan, a look, the case rule, and the guarantee across looks by simulation."""

import numpy as np
import pytest

from stats.best_set import best_set
from stats.racing import RacingPlan, cases_to_sample, race_look, racing_plan


def test_the_plan_spends_half_first_then_equal_shares():
    plan = racing_plan(alpha=0.05, rounds=3, trials_per_round=5)
    assert plan.alphas == pytest.approx((0.025, 0.025 / 3, 0.025 / 3, 0.025 / 3))
    assert sum(plan.alphas) == pytest.approx(0.05)
    assert RacingPlan.from_json(plan.to_json()) == plan
    assert racing_plan(rounds=0).alphas == (0.05,)
    with pytest.raises(ValueError, match="sum to at most alpha"):
        RacingPlan(0.05, 1, 5, (0.04, 0.02))
    with pytest.raises(ValueError, match="one per look"):
        RacingPlan(0.05, 2, 5, (0.05,))
    with pytest.raises(ValueError, match="not a racing plan"):
        RacingPlan.from_json({"alpha": 0.05})


def test_a_look_is_best_set_at_its_share_among_the_active_variants():
    rng = np.random.default_rng(0)
    graded = np.full((4, 20), 5, dtype=np.int64)
    passed = rng.binomial(graded, [[0.5], [0.8], [0.75], [0.3]]).astype(np.int64)
    plan = racing_plan(rounds=2)
    look = race_look(plan, 0, passed, graded)
    direct = best_set(passed, graded, level=0.025 / 3)
    assert look.active == direct.in_set_indices()
    assert look.best.level == pytest.approx(0.025 / 3)
    # An earlier look put variant 1 out: it stays out, the others are compared alone.
    later = race_look(plan, 1, passed, graded, active_before=(0, 2, 3))
    assert 1 not in later.active
    assert later.best.variants[1].note == "variant 1 was put out at an earlier look."
    for f in later.best.variants:
        assert f.rival in (None, 0, 2, 3) and f.rival != f.index
    alone = best_set(passed[[0, 2, 3]], graded[[0, 2, 3]], level=plan.alphas[1] / 3)
    assert later.active == tuple([0, 2, 3][i] for i in alone.in_set_indices())


def test_the_case_rule_skips_cases_where_every_active_variant_agrees():
    passed = np.array([[5, 0, 3, 5, 0], [5, 0, 5, 4, 0], [0, 5, 0, 0, 3]])
    graded = np.array([[5, 5, 5, 5, 0], [5, 5, 5, 5, 5], [5, 5, 5, 5, 5]])
    assert cases_to_sample(passed, graded, (0, 1)) == (2, 3, 4)
    assert cases_to_sample(passed, graded, (0, 1, 2)) == (0, 1, 2, 3, 4)
    # The rule is symmetric in the variants.
    assert cases_to_sample(passed[::-1], graded[::-1], (1, 2)) == (2, 3, 4)


def test_done_when_one_is_left_at_the_last_look_or_nothing_separates():
    graded = np.full((2, 10), 5, dtype=np.int64)
    far = race_look(racing_plan(), 0, np.array([[5] * 10, [0] * 10]), graded)
    assert far.active == (0,) and far.done and far.cases == ()
    assert far.best.decided
    tied = race_look(racing_plan(), 0, np.full((2, 10), 5), graded)
    assert tied.active == (0, 1) and tied.done and "cannot separate" in tied.reason
    mixed = np.full((2, 10), 3)
    last = race_look(racing_plan(rounds=1), 1, mixed, graded)
    assert last.done and "no more rounds" in last.reason
    going = race_look(racing_plan(rounds=1), 0, mixed, graded)
    assert not going.done and going.cases == tuple(range(10))
    everywhere = race_look(racing_plan(), 0, np.full((2, 10), 5), graded, all_cases=True)
    assert not everywhere.done and everywhere.cases == tuple(range(10))


def test_bad_looks_are_refused():
    graded = np.full((2, 3), 5)
    with pytest.raises(ValueError, match="look must be"):
        race_look(racing_plan(rounds=1), 2, graded, graded)
    with pytest.raises(ValueError, match="active_before"):
        race_look(racing_plan(), 0, graded, graded, active_before=(0, 7))


def simulate_race(rates, plan, rng, first=5):
    """One race at true per-case rates (V, C): the final active set and trials spent."""
    graded = np.full(rates.shape, first, dtype=np.int64)
    passed = rng.binomial(graded, rates).astype(np.int64)
    active = None
    for look in range(plan.rounds + 1):
        result = race_look(plan, look, passed, graded, active_before=active)
        active = result.active
        if result.done:
            return active, int(graded.sum())
        rows = np.array(active)[:, None]
        cols = np.array(result.cases)[None, :]
        graded[rows, cols] += plan.trials_per_round
        passed[rows, cols] += rng.binomial(plan.trials_per_round, rates[rows, cols])
    raise AssertionError("the last look is always done")


def test_racing_keeps_the_tagged_best_under_the_least_favourable_null():
    # All equal at a rate where whole cases often agree (so the case rule bites): the tagged
    # best (0) must survive every look >= 95% of races (400 races, 3 standard errors).
    rng = np.random.default_rng(5)
    plan = racing_plan(rounds=3, trials_per_round=5)
    rates = np.full((3, 12), 0.85)
    reps = 300
    kept = sum(0 in simulate_race(rates, plan, rng)[0] for _ in range(reps))
    assert kept / reps >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)


def test_racing_spends_trials_only_where_they_help():
    rng = np.random.default_rng(6)
    rates = np.array([[0.9] * 12, [0.55] * 12, [0.5] * 12])
    active, spent = simulate_race(rates, racing_plan(rounds=3), rng)
    assert 0 in active
    assert spent < 3 * 12 * (5 + 3 * 5)
