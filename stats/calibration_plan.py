"""Sizing and planning a judge's calibration sample around its false-accept rate (FAR),
P(judge pass | human fail): only human-fail items pin it down.

Bounds (two-sided 95%): the sample FAR's Wilson interval (Wilson 1927); the weighted FAR,
weights w = 1 / inclusion probability, ratio estimator p_w = Σ_fails(w · judge_pass) /
Σ_fails(w) (Horvitz & Thompson 1952; Särndal, Swensson & Wretman 1992, ch. 5) with a
Wilson interval at Kish's n_eff = (Σ w)² / Σ w² (Kish 1965, §8.2; Korn & Graubard 1998,
Survey Methodology 24(2)). With 0 false accepts in F fails the Wilson upper bound is
z² / (F + z²), so a bound t needs F >= z² (1 − t) / t (35 fails for 10%).

``plan_draw``: items go one at a time to the stratum with the highest Beta-posterior fail
probability, no stratum's sampling fraction below ``floor`` times the largest; the plan is
the shortest prefix whose Monte Carlo (fixed seed) reaches both bounds with ``power``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from stats.intervals import wilson_interval, z_value


def far_fails_needed(max_far: float, confidence: float = 0.95) -> int | None:
    """The smallest F with z² / (F + z²) <= ``max_far``; None when ``max_far`` <= 0."""
    if max_far <= 0:
        return None
    if max_far >= 1:
        return 1
    z2 = z_value(confidence) ** 2
    n = max(1, math.ceil(z2 * (1 - max_far) / max_far - 1e-9))
    while wilson_interval(0, n, confidence)[1] > max_far:  # guard the rounding
        n += 1
    while n > 1 and wilson_interval(0, n - 1, confidence)[1] <= max_far:
        n -= 1
    return n


def wilson_upper(p: np.ndarray, n: np.ndarray, confidence: float = 0.95) -> np.ndarray:
    """Vectorised Wilson upper bound for ``p`` on (effective, real) sizes ``n``; 1.0 where n = 0."""
    p = np.asarray(p, dtype=float)
    n = np.asarray(n, dtype=float)
    z = z_value(confidence)
    safe = np.where(n > 0, n, 1.0)
    denom = 1 + z * z / safe
    center = (p + z * z / (2 * safe)) / denom
    half = z / denom * np.sqrt(np.clip(p * (1 - p), 0, None) / safe + z * z / (4 * safe * safe))
    return np.where(n > 0, np.minimum(1.0, center + half), 1.0)


@dataclass(frozen=True)
class WeightedRate:
    """The weighted share, Kish's ``n_eff``, ``n`` items, and the Wilson 95% interval at
    ``n_eff``; None with ``reason`` when undefined."""

    rate: float | None
    n: int
    n_eff: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str = ""


def weighted_far(
    judge_pass: list[bool], weights: list[float], confidence: float = 0.95
) -> WeightedRate:
    """The weighted FAR over human-fail items (``weights`` = 1 / inclusion probability). Raises
    ``ValueError`` for unequal lengths or a weight <= 0."""
    if len(judge_pass) != len(weights):
        raise ValueError("judge_pass and weights differ in length")
    w = np.asarray(weights, dtype=float)
    if (w <= 0).any() or not np.isfinite(w).all():
        raise ValueError("weights must be positive and finite")
    if not len(w):
        return WeightedRate(None, 0, None, None, None, "undefined (no human fails)")
    jp = np.asarray(judge_pass, dtype=bool)
    rate = float(w[jp].sum() / w.sum())
    n_eff = float(w.sum() ** 2 / (w * w).sum())
    z = z_value(confidence)
    denom = 1 + z * z / n_eff
    center = (rate + z * z / (2 * n_eff)) / denom
    half = z / denom * math.sqrt(rate * (1 - rate) / n_eff + z * z / (4 * n_eff * n_eff))
    return WeightedRate(rate, len(w), n_eff, max(0.0, center - half), min(1.0, center + half))


@dataclass(frozen=True)
class Stratum:
    """``population`` trials; ``drawn`` in the set, ``labeled`` of those, ``fails`` human fails
    among them, ``false_accepts`` the judge passed; ``judge_pass`` the stratum's verdict;
    ``prior_fail`` the prior fail probability."""

    key: str
    population: int
    judge_pass: bool
    prior_fail: float
    drawn: int = 0
    labeled: int = 0
    fails: int = 0
    false_accepts: int = 0


@dataclass(frozen=True)
class Plan:
    """``add`` per stratum; ``to_label`` (unlabeled plus added); ``expected_fails``;
    ``probability`` (Monte Carlo) that both bounds reach the threshold; ``fails_needed``;
    ``reachable`` (``power`` attainable); ``posterior`` fail probability per stratum."""

    add: dict[str, int]
    to_label: int
    expected_fails: float
    probability: float
    power: float
    max_far: float
    fails_needed: int | None
    reachable: bool
    posterior: dict[str, float] = field(default_factory=dict)
    sims: int = 2000

    @property
    def probability_se(self) -> float:
        """Monte Carlo standard error of ``probability``."""
        return math.sqrt(self.probability * (1 - self.probability) / self.sims)


PRIOR_WEIGHT = 10.0  # pseudo-labels behind a stratum's prior fail probability


def posterior_fail(s: Stratum) -> float:
    """Beta posterior mean (fails + m q0) / (labeled + m), m = ``PRIOR_WEIGHT`` at prior ``q0``."""
    return (s.fails + PRIOR_WEIGHT * s.prior_fail) / (s.labeled + PRIOR_WEIGHT)


def draw_order(strata: list[Stratum], total: int, floor: float = 0.25) -> list[str]:
    """Stratum keys of up to ``total`` draws: highest posterior fail first, each stratum at least
    ``floor`` times the largest sampling fraction."""
    drawn = {s.key: s.drawn for s in strata}
    pop = {s.key: s.population for s in strata}
    q = {s.key: posterior_fail(s) for s in strata}
    keys = sorted((s.key for s in strata), key=lambda k: (-q[k], k))
    order: list[str] = []
    for _ in range(total):
        open_keys = [k for k in keys if drawn[k] < pop[k]]
        if not open_keys:
            break
        top = max(drawn[k] / pop[k] for k in keys if pop[k])
        behind = [k for k in open_keys if drawn[k] / pop[k] < floor * top]
        pick = behind[0] if behind else open_keys[0]
        if behind:  # the furthest behind first
            pick = min(behind, key=lambda k: (drawn[k] / pop[k], keys.index(k)))
        drawn[pick] += 1
        order.append(pick)
    return order


def reach_probability(
    strata: list[Stratum],
    add: dict[str, int],
    *,
    max_far: float,
    confidence: float = 0.95,
    sims: int = 2000,
    seed: int = 0,
) -> float:
    """Monte Carlo probability that, all drawn items labeled, both FAR upper bounds are <=
    ``max_far``: unlabeled items fail with their stratum's posterior; weights population /
    drawn."""
    rng = np.random.default_rng(seed)
    fails = np.zeros(sims)
    accepts = np.zeros(sims)
    wsum = np.zeros(sims)
    wsum_pass = np.zeros(sims)
    w2sum = np.zeros(sims)
    for s in strata:
        n = s.drawn + add.get(s.key, 0)
        if n == 0:
            continue
        unlabeled = n - s.labeled
        f = s.fails + rng.binomial(max(unlabeled, 0), posterior_fail(s), size=sims)
        w = s.population / n
        fails += f
        wsum += w * f
        w2sum += w * w * f
        if s.judge_pass:
            accepts += f
            wsum_pass += w * f
    with np.errstate(invalid="ignore", divide="ignore"):
        raw_p = np.where(fails > 0, accepts / np.maximum(fails, 1), 0.0)
        raw_up = wilson_upper(raw_p, fails, confidence)
        w_p = np.where(wsum > 0, wsum_pass / np.where(wsum > 0, wsum, 1), 0.0)
        n_eff = np.where(w2sum > 0, wsum * wsum / np.where(w2sum > 0, w2sum, 1), 0.0)
        w_up = wilson_upper(w_p, n_eff, confidence)
    return float(np.mean((raw_up <= max_far) & (w_up <= max_far)))


def plan_draw(
    strata: list[Stratum],
    *,
    max_far: float,
    power: float = 0.8,
    confidence: float = 0.95,
    floor: float = 0.25,
    sims: int = 2000,
    seed: int = 0,
) -> Plan:
    """The shortest draw in ``draw_order`` reaching both bounds with probability >= ``power``, by
    bisection on its length; ``reachable`` False (all drawn) when none does. Seeded."""
    capacity = sum(s.population - s.drawn for s in strata)
    order = draw_order(strata, capacity, floor)

    def add_for(k: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for key in order[:k]:
            out[key] = out.get(key, 0) + 1
        return out

    def prob(k: int) -> float:
        return reach_probability(
            strata, add_for(k), max_far=max_far, confidence=confidence, sims=sims, seed=seed
        )

    lo, hi = 0, len(order)
    p_hi = prob(hi)
    reachable = p_hi >= power
    if reachable and prob(0) >= power:
        hi = 0
    elif reachable:
        while hi - lo > 1:  # invariant: prob(lo) < power <= prob(hi)
            mid = (lo + hi) // 2
            if prob(mid) >= power:
                hi = mid
            else:
                lo = mid
    add = add_for(hi)
    post = {s.key: posterior_fail(s) for s in strata}
    unlabeled_now = sum(s.drawn - s.labeled for s in strata)
    expected = sum((s.drawn - s.labeled + add.get(s.key, 0)) * post[s.key] for s in strata)
    return Plan(
        add=add,
        to_label=unlabeled_now + sum(add.values()),
        expected_fails=expected,
        probability=prob(hi),
        power=power,
        max_far=max_far,
        fails_needed=far_fails_needed(max_far, confidence),
        reachable=reachable,
        posterior=post,
        sims=sims,
    )
