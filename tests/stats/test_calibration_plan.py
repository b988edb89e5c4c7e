"""The FAR-aimed calibration planner against a simulation: for a judge with a known
false-accept rate, the planned set reaches the bound with at least the promised probability.

The simulation is written apart from the planner: a population of trials is drawn item by
item (human fail or not, with the stratum's true probability), the planned numbers of items
are drawn from each stratum without replacement, and the bounds are computed with the same
functions the calibration page uses (``wilson_interval`` for the sample, ``weighted_far``
with weights population / drawn for the population estimate)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from stats.calibration_plan import (
    Stratum,
    draw_order,
    far_fails_needed,
    plan_draw,
    weighted_far,
    wilson_upper,
)
from stats.intervals import wilson_interval


@pytest.mark.parametrize(("max_far", "needed"), [(0.10, 35), (0.15, 22), (0.05, 73), (0.2, 16)])
def test_the_fewest_human_fails_for_a_far_bound(max_far, needed):
    assert far_fails_needed(max_far) == needed
    assert proportion_confint(0, needed, alpha=0.05, method="wilson")[1] <= max_far
    assert proportion_confint(0, needed - 1, alpha=0.05, method="wilson")[1] > max_far
    assert far_fails_needed(0.0) is None


def test_the_weighted_far_with_equal_weights_is_the_sample_far():
    judge_pass = [True] * 3 + [False] * 37
    w = weighted_far(judge_pass, [2.5] * 40)
    assert w.rate == pytest.approx(3 / 40) and w.n_eff == pytest.approx(40)
    assert (w.ci_low, w.ci_high) == pytest.approx(wilson_interval(3, 40))
    assert wilson_upper(np.array([3 / 40]), np.array([40.0]))[0] == pytest.approx(w.ci_high)
    unequal = weighted_far([True, False, False, False], [10.0, 1.0, 1.0, 1.0])
    assert unequal.rate == pytest.approx(10 / 13) and unequal.n_eff < 4
    with pytest.raises(ValueError):
        weighted_far([True], [0.0])


def _population(far: float) -> list[tuple[str, int, bool, float]]:
    """Strata (key, size, judge passes, true human-fail probability) of 1,000 judged
    trials whose judge has the false-accept rate ``far``: 300 judge fails (70% human
    fails), 60 judge passes a cheap rung failed (60% fails when far > 0), 640 plain passes."""
    jf_fails = 300 * 0.7
    if far == 0:
        return [("jf", 300, False, 0.7), ("jp_cheap", 60, True, 0.0), ("jp", 640, True, 0.0)]
    accepts = far * jf_fails / (1 - far)  # expected human fails the judge passes
    cheap = min(0.6, accepts / 2 / 60)
    rest = (accepts - 60 * cheap) / 640
    return [("jf", 300, False, 0.7), ("jp_cheap", 60, True, cheap), ("jp", 640, True, rest)]


def _simulate(pop, add: dict[str, int], *, max_far: float, reps: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        fails_jp = fails = 0
        judge_pass, weights = [], []
        for key, size, jp, q in pop:
            labels = rng.random(size) < q  # this population's human fails
            n = add.get(key, 0)
            if n == 0:
                continue
            drawn = labels[rng.permutation(size)[:n]]
            f = int(drawn.sum())
            fails += f
            fails_jp += f if jp else 0
            judge_pass += [jp] * f
            weights += [size / n] * f
        if fails == 0:
            continue
        raw_high = wilson_interval(fails_jp, fails)[1]
        w_high = weighted_far(judge_pass, weights).ci_high
        hits += raw_high <= max_far and w_high <= max_far
    return hits / reps


@pytest.mark.parametrize("far", [0.0, 0.02, 0.04])
def test_the_planned_set_reaches_the_far_bound_with_the_promised_probability(far):
    pop = _population(far)
    true_far = sum(n * q for _, n, jp, q in pop if jp) / sum(n * q for _, n, _, q in pop)
    assert true_far == pytest.approx(far)
    strata = [Stratum(key, n, jp, q) for key, n, jp, q in pop]
    plan = plan_draw(strata, max_far=0.10, power=0.8)
    assert plan.reachable and plan.probability >= 0.8
    assert plan.to_label == sum(plan.add.values()) < 1000
    reps = 3000
    observed = _simulate(pop, plan.add, max_far=0.10, reps=reps, seed=12345)
    # Monte Carlo error of the planner's estimate (2,000 draws) and of this simulation.
    se = math.sqrt(0.8 * 0.2 / 2000 + 0.8 * 0.2 / reps)
    assert observed >= 0.8 - 3 * se, (plan, observed)
    # One item fewer per planned 10% would not have been enough by the planner's own model.
    if sum(plan.add.values()) > 20:
        fewer = dict(plan.add)
        key = max(fewer, key=lambda k: fewer[k])
        fewer[key] -= max(1, fewer[key] // 10)
        assert _simulate(pop, fewer, max_far=0.10, reps=800, seed=7) < observed


def test_a_judge_whose_far_is_above_the_threshold_gets_no_plan():
    pop = _population(0.2)
    strata = [Stratum(key, n, jp, q) for key, n, jp, q in pop]
    plan = plan_draw(strata, max_far=0.10)
    assert not plan.reachable and plan.probability < 0.8


def test_labels_already_given_update_the_plan():
    prior = [Stratum("jf", 300, False, 0.7), Stratum("jp", 700, True, 0.05)]
    before = plan_draw(prior, max_far=0.10)
    # 60 labeled judge passes, none a human fail: the judge's passes look clean.
    after = plan_draw(
        [
            Stratum("jf", 300, False, 0.7, drawn=40, labeled=40, fails=30),
            Stratum("jp", 700, True, 0.05, drawn=60, labeled=60, fails=0),
        ],
        max_far=0.10,
    )
    assert after.posterior["jp"] < before.posterior["jp"]
    assert after.reachable


def test_the_draw_order_fills_likely_fails_first_and_keeps_every_stratum_sampled():
    strata = [Stratum("a", 100, False, 0.9), Stratum("b", 400, True, 0.05)]
    order = draw_order(strata, 100, floor=0.25)
    frac_a = order.count("a") / 100
    frac_b = order.count("b") / 400
    assert order.count("a") > order.count("b") * 100 / 400
    assert frac_b >= 0.25 * frac_a - 1 / 400
