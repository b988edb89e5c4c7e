"""What a variant of an experiment costs: cost per trial, cost per passing trial with a
case-clustered interval, the cheapest variant within the best set, the quality-cost Pareto
front.

``cost_usd`` is a float array (V, C) in USD, each cell the summed cost of every trial of that
variant on that case (errored trials included: they were paid for); NaN where a cost is
unknown. The cases left out by ``stats.best_set.best_set`` (a variant with no graded trial)
are left out here too, so cost and quality rest on the same cases.

Cost per passing trial is the ratio R = Σ_c y_c / Σ_c x_c (y cost, x passes of case c). Its
interval treats cases as a sample (the per-case pair (y_c, x_c) carries the trial noise too):
Fieller's interval for a ratio of means (Fieller 1954, J. R. Statist. Soc. B 16:175–185) with
Student t on C − 1 df, the set of R where |ȳ − R x̄| is not significant:

    (x̄² − q s_xx) R² − 2 (x̄ȳ − q s_xy) R + (ȳ² − q s_yy) <= 0,   q = t² / C

(s the sample covariances over cases, ddof 1). Unlike the delta method it is never negative
and says "unbounded" when the passes per case could be zero (x̄² <= q s_xx). One case: no
interval. Coverage against a case bootstrap: tests/stats/test_cost_choice.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from stats.best_set import BestSet, counts_checked, variant_labeler


@dataclass(frozen=True)
class CostFigure:
    """One variant's cost over the kept cases. ``cost_per_trial`` (USD per graded trial, with
    ``trial_low``/``trial_high``: the same ratio interval, graded trials in place of passes) and
    ``cost_per_pass`` (USD per passing trial) with ``low``/``high`` (``high`` None when
    unbounded); None when unknown, with ``reason`` saying why ("cost unknown for 3 of 30
    cases", "no passing trial"). ``total_usd`` None when any cost is unknown."""

    index: int
    total_usd: float | None
    cost_per_trial: float | None
    cost_per_pass: float | None
    low: float | None
    high: float | None
    reason: str = ""
    trial_low: float | None = None
    trial_high: float | None = None


@dataclass(frozen=True)
class CostChoice:
    """``index``: the cheapest variant by cost per trial among the best set's (None when a
    cost in the set is unknown; ``reason`` says which); ``figures`` for every variant;
    ``confidence`` of the cost-per-pass intervals; ``method``."""

    index: int | None
    reason: str
    figures: tuple[CostFigure, ...]
    confidence: float
    method: str


def cost_per_pass_interval(
    cost: np.ndarray, passes: np.ndarray, *, confidence: float = 0.95
) -> tuple[float, float | None, float | None]:
    """(ratio, low, high): Σ cost / Σ passes with Fieller's interval (module docstring).
    ``cost``, ``passes``: float arrays (C,), finite, Σ passes > 0 (not checked). ``high``
    None: unbounded above; both None: one case. Raises ``ValueError`` for a confidence
    outside (0, 1)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    y = np.asarray(cost, dtype=float)
    x = np.asarray(passes, dtype=float)
    ratio = float(y.sum() / x.sum())
    c = y.size
    if c < 2:
        return ratio, None, None
    q = float(student_t.ppf(0.5 + confidence / 2, c - 1)) ** 2 / c
    xm, ym = float(x.mean()), float(y.mean())
    cov = np.cov(np.stack([x, y]), ddof=1)
    sxx, sxy, syy = float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])
    a = xm * xm - q * sxx
    b = xm * ym - q * sxy
    cc = ym * ym - q * syy
    if a <= 0:
        return ratio, 0.0, None
    disc = max(b * b - a * cc, 0.0)
    low = (b - math.sqrt(disc)) / a
    high = (b + math.sqrt(disc)) / a
    return ratio, max(0.0, min(low, ratio)), max(high, ratio)


def cheapest(
    best: BestSet,
    cost_usd: np.ndarray | Sequence[Sequence[float]],
    passed: np.ndarray | Sequence[Sequence[int]],
    graded: np.ndarray | Sequence[Sequence[int]],
    *,
    confidence: float = 0.95,
    names: Sequence[str] | None = None,
) -> CostChoice:
    """The cheapest variant within ``best``'s set by cost per trial, and every variant's
    ``CostFigure``. ``cost_usd`` float (V, C) in USD (NaN unknown); ``passed``, ``graded`` the
    arrays ``best`` was computed from. A tie on cost per trial goes to the higher estimate,
    then the lower index. Raises ``ValueError`` as ``stats.best_set.counts_checked``, for a
    ``cost_usd`` of another shape, a negative or infinite cost, or variants other than
    ``best``'s."""
    x, n, dropped = counts_checked(passed, graded)
    y = np.asarray(cost_usd, dtype=float)
    if y.shape != np.shape(passed):
        raise ValueError(f"cost_usd must be (variants, cases) {np.shape(passed)}, got {y.shape}")
    if np.any(np.isinf(y)) or np.any(y < 0):
        raise ValueError("costs must be finite and >= 0 (NaN for unknown)")
    if len(best.variants) != x.shape[0] or dropped != best.dropped_cases:
        raise ValueError("best was computed on other data")
    y = np.delete(y, list(dropped), axis=1)
    label = variant_labeler(names, x.shape[0])
    figures = tuple(_figure(v, y[v], x[v], n[v], confidence) for v in range(x.shape[0]))
    in_set = best.in_set_indices()
    unknown = [i for i in in_set if figures[i].cost_per_trial is None]
    method = (
        "cost per passing trial = total cost / passes, Fieller's interval over cases "
        "(Fieller 1954), t with C - 1 df"
    )
    if unknown:
        return CostChoice(
            None,
            f"the cost of {', '.join(label(i) for i in unknown)} is unknown, so the cheapest "
            "variant in the set is unknown.",
            figures,
            confidence,
            method,
        )
    estimates = {v.index: v.estimate for v in best.variants}
    pick = min(in_set, key=lambda i: (figures[i].cost_per_trial, -estimates[i], i))
    if len(in_set) == 1:
        reason = f"{label(pick)} is the only variant in the best set."
    else:
        reason = (
            f"{label(pick)} costs least per trial of the {len(in_set)} variants in the best set "
            "(quality cannot tell them apart)."
        )
    return CostChoice(pick, reason, figures, confidence, method)


def _figure(
    index: int, y: np.ndarray, x: np.ndarray, n: np.ndarray, confidence: float
) -> CostFigure:
    missing = int(np.count_nonzero(np.isnan(y)))
    if missing:
        return CostFigure(
            index, None, None, None, None, None, f"cost unknown for {missing} of {y.size} cases"
        )
    total = float(y.sum())
    per_trial, trial_low, trial_high = cost_per_pass_interval(
        y, n.astype(float), confidence=confidence
    )
    if x.sum() == 0:
        return CostFigure(
            index, total, per_trial, None, None, None, "no passing trial", trial_low, trial_high
        )
    ratio, low, high = cost_per_pass_interval(y, x.astype(float), confidence=confidence)
    reason = ""
    if low is None:
        reason = "one case: no interval"
    elif high is None:
        reason = "too few passes per case for an upper bound"
    return CostFigure(index, total, per_trial, ratio, low, high, reason, trial_low, trial_high)


def pareto_front(
    quality: Sequence[float] | np.ndarray, cost: Sequence[float | None] | np.ndarray
) -> tuple[int, ...]:
    """Indices (ascending) of the variants no other dominates; j dominates i when quality_j >=
    quality_i and cost_j <= cost_i, one of them strict. A variant of unknown cost (None or
    NaN) neither dominates nor is dominated, so it is always on the front (nothing can be said
    of it). Point estimates: the intervals beside them say how sure the front is. Raises
    ``ValueError`` for lengths that differ or a non-finite quality."""
    q = np.asarray(quality, dtype=float)
    c = np.array([np.nan if v is None else float(v) for v in cost], dtype=float)
    if q.ndim != 1 or q.shape != c.shape:
        raise ValueError(f"quality and cost: one value per variant, got {q.shape}, {c.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("quality must be finite")
    known = ~np.isnan(c)
    front = []
    for i in range(q.size):
        dominated = known[i] and bool(
            np.any(known & (q >= q[i]) & (c <= c[i]) & ((q > q[i]) | (c < c[i])))
        )
        if not dominated:
            front.append(i)
    return tuple(front)
