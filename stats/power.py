"""Power of the case-stratified comparison: the smallest drop a suite can detect.

1. The baseline's per-case rates ``r_i`` are the truth; a drop ``d`` of the mean is spread
   in proportion: ``r_i' = r_i (1 − d / mean(r))``.
2. ``n_sim`` pairs ``b_i ~ Bin(N, r_i)``, ``h_i ~ Bin(N, r_i')`` from common random numbers
   (inverse CDF), so power is monotone in ``d``.
3. Each pair is tested with ``T = mean_i (h_i − b_i) / N`` against the exact mean and
   variance of its permutation null (per case hypergeometric,
   ``Var(k_i) = N p_i (1 − p_i) N / (2N − 1)``, ``p_i = s_i / 2N``), normally approximated:
   reject when ``|T| − 1/(N C) ≥ z_{1−α/2} sqrt(V)``, V > 0. The gate itself is exact
   (``stats.compare``); ``tests/stats/test_power.py`` checks this against it.
4. The minimum detectable drop is the smallest 1-point grid value with power ≥ target.

Simulation power for permutation tests: Good (2005), *Permutation, Parametric and Bootstrap
Tests of Hypotheses*, ch. 3."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr
from scipy.stats import binom, norm

# Work per power evaluation is capped at this many comparisons (n_sim x cases x trials);
# above it the simulation uses fewer simulated runs (never fewer than MIN_SIM).
MAX_DRAWS = 12_000_000
MIN_SIM = 100
GRID_STEP = 0.01


@dataclass(frozen=True)
class DetectableDrop:
    """``drop``: a fraction in (0, 1] detected with ≥ ``target_power`` at two-sided ``alpha``;
    None (``reason``) when even ``max_drop`` (every case to 0%) is not. ``power`` at ``drop``
    (else ``max_drop``); ``n_sim``; ``n_cases`` x ``trials_per_case`` a side."""

    drop: float | None
    power: float
    alpha: float
    target_power: float
    n_cases: int
    trials_per_case: int
    n_sim: int
    max_drop: float
    method: str = (
        "simulation from baseline per-case rates; normal approximation of the "
        "stratified permutation null"
    )
    reason: str = ""


class _Simulator:
    """One uniform per (simulated run, case, side), shared across drops (power monotone in drop)."""

    def __init__(self, rates: np.ndarray, trials: int, n_sim: int, alpha: float, seed: int):
        rng = np.random.default_rng(seed)
        self.rates = rates
        self.trials = trials
        self.mean = float(rates.mean())
        self.base = _binomial_from_uniforms(
            rng.random((n_sim, rates.size), dtype=np.float32), trials, rates
        )
        self.head_u = rng.random((n_sim, rates.size), dtype=np.float32)
        self.z = float(norm.ppf(1 - alpha / 2))
        self._cache: dict[int, float] = {}

    def head_rates(self, step: int) -> np.ndarray:
        d = min(step * GRID_STEP, self.mean)
        return self.rates * (1 - d / self.mean) if self.mean > 0 else self.rates

    def power(self, step: int) -> float:
        """Share of simulated pairs rejected at a drop of ``step`` grid steps."""
        if step not in self._cache:
            head = _binomial_from_uniforms(self.head_u, self.trials, self.head_rates(step))
            self._cache[step] = float(
                np.mean(stratified_rejects(self.base, head, self.trials, self.z))
            )
        return self._cache[step]

    def approx_power(self, step: int) -> float:
        """Φ((d − z sqrt(V0)) / σ1), no simulation: the search's starting point."""
        q, r, n, c = self.head_rates(step), self.rates, self.trials, self.rates.size
        d = float(r.mean() - q.mean())
        p = (r + q) / 2
        v0 = (4.0 / (n * n)) * float(np.sum(n * p * (1 - p) * n / (2 * n - 1))) / (c * c)
        v1 = float(np.sum(r * (1 - r) + q * (1 - q))) / n / (c * c)
        if v1 <= 0:
            return 1.0 if d - 1 / (n * c) > self.z * np.sqrt(v0) else 0.0
        # ndtr is what norm.cdf computes, without its ~1 ms of argument handling per call.
        return float(ndtr((d - 1 / (n * c) - self.z * np.sqrt(v0)) / np.sqrt(v1)))


def _binomial_from_uniforms(u: np.ndarray, trials: int, rates: np.ndarray) -> np.ndarray:
    """Binomial(trials, rates[j]) from uniforms ``u`` (n_sim, cases) by the inverse CDF."""
    cdf = np.asarray(binom.cdf(np.arange(trials)[None, :], trials, rates[:, None]), np.float32)
    # One comparison per j over the whole (n_sim, cases) array: the same counts as one
    # (n_sim, cases, trials) comparison summed over its last axis, ~5x faster.
    counts = np.zeros(u.shape, dtype=np.int32)
    for j in range(trials):
        counts += u > cdf[:, j]
    return counts


def stratified_rejects(base: np.ndarray, head: np.ndarray, trials: int, z: float) -> np.ndarray:
    """Per simulated pair, ``|T| ≥ z sqrt(V)`` with V > 0 (step 3). ``base``/``head``: passes,
    shape (n_sim, n_cases)."""
    n_cases = base.shape[1]
    n = float(trials)
    # The per-case null variance depends only on the pooled passes s = 0..2N: computed once
    # per value (the same float operations, so the same values) and looked up per case.
    p = np.arange(2 * trials + 1, dtype=np.float64) / (2 * n)
    var_of_s = n * p * (1 - p) * n / (2 * n - 1)
    var_k = var_of_s[base + head]
    var_t = (4.0 / (n * n)) * var_k.sum(axis=1) / (n_cases * n_cases)
    t = (head - base).sum(axis=1) / (n * n_cases)
    # Continuity correction: T lives on a lattice of step 2/(N C) and the exact test counts
    # ties as extreme, so half a step is taken off |T| (Yates-style; without it the
    # approximation overstates small suites' power, see tests/stats/test_power.py).
    half_step = 1.0 / (n * n_cases)
    rejects: np.ndarray = (var_t > 0) & (np.abs(t) - half_step >= z * np.sqrt(var_t) - 1e-12)
    return rejects


def min_detectable_drop(
    rates: Sequence[float],
    trials_per_case: int,
    *,
    alpha: float = 0.05,
    target_power: float = 0.8,
    n_sim: int = 400,
    seed: int = 0,
) -> DetectableDrop:
    """``rates``: baseline per-case rates; ``trials_per_case``: N a side. Seeded; ``n_sim``
    lowered so one evaluation makes at most ``MAX_DRAWS`` comparisons (~110 ms for 2,000 cases
    x 5 trials; bench/RESULTS-comparison.md). Raises ``ValueError`` for no cases, rates
    outside [0, 1], N < 1, or alpha/target_power outside (0, 1)."""
    r = np.asarray(rates, dtype=float)
    if r.size == 0:
        raise ValueError("rates: no cases")
    if not np.all(np.isfinite(r)) or r.min() < 0 or r.max() > 1:
        raise ValueError("rates: every per-case rate must be in [0, 1]")
    if trials_per_case < 1:
        raise ValueError("trials_per_case must be at least 1")
    if not 0 < alpha < 1 or not 0 < target_power < 1:
        raise ValueError("alpha and target_power must be in (0, 1)")
    n_sim = max(MIN_SIM, min(n_sim, MAX_DRAWS // (r.size * trials_per_case)))
    sim = _Simulator(r, trials_per_case, n_sim, alpha, seed)
    max_drop = sim.mean
    top = int(np.ceil(max_drop / GRID_STEP - 1e-9))
    common: dict[str, Any] = {
        "alpha": alpha,
        "target_power": target_power,
        "n_cases": int(r.size),
        "trials_per_case": trials_per_case,
        "n_sim": n_sim,
        "max_drop": max_drop,
    }
    if top < 1 or sim.power(top) < target_power:
        return DetectableDrop(
            drop=None,
            power=sim.power(top) if top >= 1 else 0.0,
            reason=f"even a drop to 0% is detected with power below {target_power:.0%}",
            **common,
        )
    # Start where the normal approximation says, then walk the grid with the simulation
    # (usually two or three evaluations), falling back to bisection when far off.
    guess = next((k for k in range(1, top + 1) if sim.approx_power(k) >= target_power), top)
    lo, hi = 0, top  # invariant: power(lo) < target (or lo = 0), power(hi) >= target
    if sim.power(guess) >= target_power:
        hi = guess
        below = max(guess - 1, 0)
        if below == 0 or sim.power(below) < target_power:
            lo = below
    else:
        lo = guess
        if guess + 1 <= top and sim.power(guess + 1) >= target_power:
            hi = guess + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sim.power(mid) >= target_power:
            hi = mid
        else:
            lo = mid
    return DetectableDrop(drop=min(hi * GRID_STEP, max_drop), power=sim.power(hi), **common)


def power_at_drop(
    rates: Sequence[float],
    trials_per_case: int,
    drop: float,
    *,
    alpha: float = 0.05,
    n_sim: int = 400,
    seed: int = 0,
) -> float:
    """Estimated power at ``drop`` (snapped to the 1-point grid), as ``min_detectable_drop``."""
    r = np.asarray(rates, dtype=float)
    sim = _Simulator(r, trials_per_case, n_sim, alpha, seed)
    return sim.power(int(round(drop / GRID_STEP)))
