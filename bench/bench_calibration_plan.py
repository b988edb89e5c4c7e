"""Simulation of the FAR-aimed calibration planner (not part of the test suite).

For judges with a known false-accept rate (FAR) over a run of 1,000 judged trials (300
judge fails, 70% of them human fails; 60 judge passes a cheap rung failed; 640 plain judge
passes; the human fails the judge passes split between those two), the planner
(``stats.calibration_plan.plan_draw``, threshold 10%, power 80%) plans a set; the set is
then drawn and labeled ``--reps`` times from freshly simulated populations, and the share
of draws whose sample and weighted FAR upper bounds are both <= 10% is reported with its
Monte Carlo SE. For comparison, the same planner with ``floor = 1`` (every stratum at the
same sampling fraction: a proportional, self-weighting sample) gives the size a plain
stratified random sample needs for the same probability.

Usage: python bench/bench_calibration_plan.py [--reps 3000]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stats.calibration_plan import Stratum, far_fails_needed, plan_draw, weighted_far  # noqa: E402
from stats.intervals import wilson_interval  # noqa: E402

MAX_FAR = 0.10


def population(far: float) -> list[tuple[str, int, bool, float]]:
    """(key, size, judge passes, human-fail probability) with the judge's FAR = ``far``."""
    jf_fails = 300 * 0.7
    accepts = far * jf_fails / (1 - far)
    cheap = min(0.6, accepts / 2 / 60)
    rest = (accepts - 60 * cheap) / 640
    return [("jf", 300, False, 0.7), ("jp_cheap", 60, True, cheap), ("jp", 640, True, rest)]


def simulate(pop, add: dict[str, int], reps: int, seed: int) -> tuple[float, float]:
    """Share of simulated draws where both bounds are <= MAX_FAR, mean human fails drawn."""
    rng = np.random.default_rng(seed)
    hits, fails_total = 0, 0
    for _ in range(reps):
        fails = fails_jp = 0
        judge_pass, weights = [], []
        for key, size, jp, q in pop:
            n = add.get(key, 0)
            if not n:
                continue
            labels = rng.random(size) < q
            f = int(labels[rng.permutation(size)[:n]].sum())
            fails += f
            fails_jp += f if jp else 0
            judge_pass += [jp] * f
            weights += [size / n] * f
        fails_total += fails
        if fails:
            ok = wilson_interval(fails_jp, fails)[1] <= MAX_FAR
            hits += ok and weighted_far(judge_pass, weights).ci_high <= MAX_FAR
    return hits / reps, fails_total / reps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3000)
    args = parser.parse_args()
    print(
        f"human fails needed for a Wilson 95% upper bound <= 10% with 0 false accepts: "
        f"{far_fails_needed(MAX_FAR)}"
    )
    print(
        "| judge FAR | planned items | expected human fails | planner P | simulated P (SE) "
        "| mean human fails drawn | proportional sample: items (planner P) | plan time |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for far in (0.0, 0.02, 0.04, 0.06):
        pop = population(far)
        strata = [Stratum(k, n, jp, q) for k, n, jp, q in pop]
        start = time.perf_counter()
        plan = plan_draw(strata, max_far=MAX_FAR, power=0.8)
        elapsed = time.perf_counter() - start
        prop = plan_draw(strata, max_far=MAX_FAR, power=0.8, floor=1.0)
        if not plan.reachable:
            print(f"| {far:.0%} | unreachable | | {plan.probability:.3f} | | | | {elapsed:.2f} s |")
            continue
        p, mean_fails = simulate(pop, plan.add, args.reps, seed=1)
        se = math.sqrt(p * (1 - p) / args.reps)
        prop_items = sum(prop.add.values()) if prop.reachable else "unreachable"
        print(
            f"| {far:.0%} | {sum(plan.add.values())} ({plan.add}) | {plan.expected_fails:.1f} "
            f"| {plan.probability:.3f} | {p:.3f} ({se:.3f}) | {mean_fails:.1f} "
            f"| {prop_items} ({prop.probability:.3f}) | {elapsed:.2f} s |"
        )
    pop = population(0.2)
    plan = plan_draw([Stratum(k, n, jp, q) for k, n, jp, q in pop], max_far=MAX_FAR)
    print(
        f"| 20% | unreachable: {not plan.reachable} (P with every trial drawn "
        f"{plan.probability:.3f}) | | | | | | |"
    )


if __name__ == "__main__":
    main()
