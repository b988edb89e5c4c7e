"""Correcting an observed pass rate for a judge's measured error (Rogan–Gladen); undefined
results are None with a reason. ``corrected_rate_interval`` is the one shown;
``corrected_pass_rate`` (pooled binomial) can be narrower than the raw interval."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stats.intervals import ClusteredMean, clustered_rate_interval, wilson_interval, z_value


@dataclass(frozen=True)
class CorrectedRate:
    """Rogan–Gladen estimate in [0, 1] (``clipped`` says whether it was clipped) with
    ``ci_low``/``ci_high`` and ``se``; None with ``reason`` when undefined. From
    ``corrected_rate_interval`` also ``method``, ``tpr``, ``tnr`` and ``raw`` (the judge's
    ``clustered_rate_interval``)."""

    estimate: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    clipped: bool
    reason: str = ""
    method: str = ""
    tpr: float | None = None
    tnr: float | None = None
    raw: ClusteredMean | None = None


def _check_proportion(name: str, value: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a proportion in [0, 1], got {value!r}")


def corrected_pass_rate(
    observed: float,
    tpr: float,
    tnr: float,
    *,
    n_observed: int | None = None,
    n_pass: int | None = None,
    n_fail: int | None = None,
    confidence: float = 0.95,
) -> CorrectedRate:
    """Rogan–Gladen estimator (Rogan & Gladen 1978, Am. J. Epidemiol. 107(1):71–76):

        θ = (p_obs + tnr − 1) / (tpr + tnr − 1),  clipped to [0, 1]

    tpr = P(judge pass | human pass), tnr = P(judge fail | human fail). Undefined when
    tpr + tnr <= 1. With ``n_observed``, ``n_pass``, ``n_fail``, the delta method over three
    independent binomials (Greenland 1996, Int. J. Epidemiol. 25(6); Reiczigel, Földi &
    Ózsvári 2010, Epidemiol. Infect. 138(11), eq. 2), J = tpr + tnr − 1, θ unclipped:

        var(θ) = [p(1−p)/n_obs + θ² tpr(1−tpr)/n_pass + (1−θ)² tnr(1−tnr)/n_fail] / J²

    normal interval clipped to [0, 1]. Raises ``ValueError`` for a value outside [0, 1] or a
    non-positive sample size."""
    _check_proportion("observed", observed)
    _check_proportion("tpr", tpr)
    _check_proportion("tnr", tnr)
    sizes = (n_observed, n_pass, n_fail)
    for name, n in zip(("n_observed", "n_pass", "n_fail"), sizes, strict=True):
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
            raise ValueError(f"{name} must be a positive integer, got {n!r}")
    youden = tpr + tnr - 1.0
    if youden <= 0.0:
        return CorrectedRate(
            None,
            None,
            None,
            None,
            False,
            "undefined (tpr + tnr <= 1: the judge is no better than chance)",
        )
    theta = (observed + tnr - 1.0) / youden
    estimate = min(1.0, max(0.0, theta))
    clipped = estimate != theta
    if n_observed is None or n_pass is None or n_fail is None:  # a size unknown
        return CorrectedRate(estimate, None, None, None, clipped)
    var = (
        observed * (1.0 - observed) / n_observed
        + theta**2 * tpr * (1.0 - tpr) / n_pass
        + (1.0 - theta) ** 2 * tnr * (1.0 - tnr) / n_fail
    ) / youden**2
    se = math.sqrt(max(var, 0.0))
    z = z_value(confidence)
    return CorrectedRate(
        estimate,
        se,
        max(0.0, min(theta - z * se, 1.0)),
        min(1.0, max(theta + z * se, 0.0)),
        clipped,
    )


def corrected_rate_interval(
    passed: Sequence[int] | np.ndarray,
    graded: Sequence[int] | np.ndarray,
    *,
    tp: int,
    fn: int,
    tn: int,
    fp: int,
    confidence: float = 0.95,
) -> CorrectedRate:
    """Rogan–Gladen-corrected mean per-case pass rate, clustered by case, carrying the judge's
    TPR/TNR uncertainty.

    ``passed``/``graded``: per-case judge verdicts as ``clustered_rate_interval``; ``tp, fn,
    tn, fp``: calibration counts against human labels, independent of the run. Each case's
    judge rate is ``q_i = (1 − TNR) + J·p_i``, so θ̂ = (q̂ + tnr − 1)/(tpr + tnr − 1), clipped.

    Interval: MOVER (Zou & Donner 2008, Stat. Med. 27(10):1693–1702; Newcombe 2011): each input
    moved alone to its limits, q to ``clustered_rate_interval`` (Korn–Graubard), tpr and tnr to
    their Wilson limits (±∞ where tpr + tnr ≤ 1); ``low = θ̂ − sqrt(Σ d⁻_j²)``, ``high = θ̂ +
    sqrt(Σ d⁺_j²)``, clipped. The delta method of Greenland (1996) and Reiczigel et al.
    (2010) with score intervals per term, as in Lang & Reiczigel (2014, Prev. Vet. Med.
    113:13–22). It always contains the Rogan–Gladen image of the raw interval and is never
    narrower than ``min(1, (q_U − q_L)/Ĵ)``. ``se``: delta-method, descriptive. Coverage:
    docs/statistics.md.

    None (``reason``) for no cases, no human passes or fails, or tpr + tnr <= 1. Raises
    ``ValueError`` for negative or non-integer counts and as ``clustered_rate_interval``."""
    counts = {"tp": tp, "fn": fn, "tn": tn, "fp": fp}
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    raw = clustered_rate_interval(passed, graded, confidence=confidence)

    def undefined(reason: str, tpr: float | None = None, tnr: float | None = None) -> CorrectedRate:
        return CorrectedRate(
            None, None, None, None, False, reason, "rogan-gladen-mover", tpr, tnr, raw
        )

    n_pass, n_fail = tp + fn, tn + fp
    if n_pass == 0 or n_fail == 0:
        which = "passes" if n_pass == 0 else "fails"
        return undefined(f"undefined (the calibration counts have no human {which})")
    tpr, tnr = tp / n_pass, tn / n_fail
    youden = tpr + tnr - 1.0
    if youden <= 0.0:
        return undefined("undefined (tpr + tnr <= 1: the judge is no better than chance)", tpr, tnr)
    if raw.mean is None:
        return undefined("undefined (no judge verdicts)", tpr, tnr)

    q, q_low, q_high, raw_se = raw.mean, raw.ci_low, raw.ci_high, raw.se
    # clustered_rate_interval gives its se and interval with every mean.
    assert q_low is not None and q_high is not None and raw_se is not None
    theta = (q + tnr - 1.0) / youden
    tpr_low, tpr_high = wilson_interval(tp, n_pass, confidence)
    tnr_low, tnr_high = wilson_interval(tn, n_fail, confidence)
    down = [(q - q_low) / youden]
    up = [(q_high - q) / youden]
    for values in (
        [_rogan_gladen(q, a, tnr) for a in (tpr_low, tpr_high)],
        [_rogan_gladen(q, tpr, b) for b in (tnr_low, tnr_high)],
    ):
        down.append(max(0.0, theta - min(values)))
        up.append(max(0.0, max(values) - theta))
    low = theta - math.sqrt(sum(d * d for d in down))
    high = theta + math.sqrt(sum(u * u for u in up))
    estimate = min(1.0, max(0.0, theta))
    low, high = max(0.0, min(low, estimate)), min(1.0, max(high, estimate))
    floor = min(1.0, (q_high - q_low) / youden)
    if high - low < floor:
        # Clipped at a bound: widen away from it, never below the raw width / J.
        if low <= 0.0:
            high = min(1.0, low + floor)
        else:
            low = max(0.0, high - floor)
    var = (
        raw_se**2
        + theta**2 * tpr * (1.0 - tpr) / n_pass
        + (1.0 - theta) ** 2 * tnr * (1.0 - tnr) / n_fail
    ) / youden**2
    return CorrectedRate(
        estimate,
        math.sqrt(var),
        low,
        high,
        estimate != theta,
        "",
        "rogan-gladen-mover",
        tpr,
        tnr,
        raw,
    )


def _rogan_gladen(q: float, tpr: float, tnr: float) -> float:
    """Unclipped (q + tnr − 1)/(tpr + tnr − 1); ±inf when the denominator is <= 0; 0 for 0/0."""
    numerator, denominator = q + tnr - 1.0, tpr + tnr - 1.0
    if denominator > 0.0:
        return numerator / denominator
    if numerator == 0.0:
        return 0.0
    return math.copysign(math.inf, numerator)
