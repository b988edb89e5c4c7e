"""Benchmark and simulation for the comparison statistics (not part of the test suite).

1. Speed: 1,000 cases × 10 trials a side × 10,000 resamples, Monte Carlo path (and the
   exact path), against scipy.stats.permutation_test on the same trials (paired
   trial by trial, permutation_type="samples", vectorised statistic), in one run.
2. Calibration: false-positive rate at alpha = 0.05 under a true null for suites of
   12×5, 30×5 and 100×5 with case pass rates spread over (0, 1), and power for a drop from
   90% to 40% on 12×5 and a 10-point drop on 30×5 and 100×5, with Monte Carlo SEs.

Usage: python bench/bench_stats.py [--sims 1000]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
from scipy import stats as sps

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stats.compare import stratified_permutation_test  # noqa: E402


def timed(fn, repeat=3):
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def speed() -> None:
    rng = np.random.default_rng(0)
    rates = rng.uniform(0.05, 0.95, 1000)
    base = rng.random((1000, 10)) < rates[:, None]
    head = rng.random((1000, 10)) < rates[:, None]
    base_l, head_l = base.tolist(), head.tolist()
    mc = timed(
        lambda: stratified_permutation_test(
            base_l, head_l, n_resamples=10_000, seed=1, method="monte-carlo"
        )
    )
    exact = timed(lambda: stratified_permutation_test(base_l, head_l))

    def scipy_run():
        sps.permutation_test(
            (head.ravel().astype(float), base.ravel().astype(float)),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=10_000,
            vectorized=True,
            random_state=1,
        )

    ref = timed(scipy_run, repeat=1)
    print("| 1,000 cases × 10 trials a side | seconds |")
    print("|---|---|")
    print(f"| Assay, Monte Carlo, 10,000 resamples | {mc:.2f} |")
    print(f"| Assay, exact (convolution) | {exact:.2f} |")
    print(f"| scipy.stats.permutation_test, 10,000 resamples | {ref:.2f} |")
    print(f"| ratio scipy / Assay Monte Carlo | {ref / mc:.1f}× |")


def rejection_rate(n_cases, n_trials, base_rates, head_rates, sims, rng):
    rejections = 0
    for _ in range(sims):
        base = rng.random((n_cases, n_trials)) < base_rates[:, None]
        head = rng.random((n_cases, n_trials)) < head_rates[:, None]
        result = stratified_permutation_test(base.tolist(), head.tolist(), seed=0)
        rejections += result.p_value < 0.05
    rate = rejections / sims
    return rate, math.sqrt(rate * (1 - rate) / sims)


def calibration(sims: int) -> None:
    rng = np.random.default_rng(2026)
    print("\n| scenario | rejection rate at alpha 0.05 | MC SE | simulations |")
    print("|---|---|---|---|")
    for n_cases in (12, 30, 100):
        rates = rng.uniform(0.02, 0.98, n_cases)
        rate, se = rejection_rate(n_cases, 5, rates, rates, sims, rng)
        label = f"null, {n_cases}×5, case rates spread over (0, 1)"
        print(f"| {label} | {rate:.3f} | {se:.3f} | {sims} |")
    rate, se = rejection_rate(12, 5, np.full(12, 0.9), np.full(12, 0.4), sims, rng)
    print(f"| power, 12×5, 90% → 40% | {rate:.3f} | {se:.3f} | {sims} |")
    for n_cases in (30, 100):
        rates = rng.uniform(0.3, 0.98, n_cases)
        rate, se = rejection_rate(n_cases, 5, rates, np.clip(rates - 0.10, 0, 1), sims, rng)
        print(f"| power, {n_cases}×5, 10-point drop | {rate:.3f} | {se:.3f} | {sims} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sims", type=int, default=1000)
    args = parser.parse_args()
    speed()
    calibration(args.sims)
