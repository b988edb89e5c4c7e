"""Correcting an observed pass rate for a judge's measured error (Rogan–Gladen).

Pure functions (numpy/scipy only). Undefined results are None with a reason, never NaN.

``corrected_rate_interval`` is the one to show: clustered by case and carrying the
uncertainty of the judge's TPR and TNR from its calibration counts. ``corrected_pass_rate``
(pooled-binomial delta method) is kept for comparison; its interval can be narrower than the
raw clustered one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stats.intervals import ClusteredMean, clustered_rate_interval, wilson_interval, z_value


@dataclass(frozen=True)
class CorrectedRate:
    """Rogan–Gladen estimate of the true pass rate, in [0, 1].

    ``estimate`` is clipped to [0, 1] (``clipped`` says whether it was); ``ci_low``/``ci_high``
    a delta-method normal interval, clipped to [0, 1]; ``se`` its standard error (None when
    no sample sizes were given). All None with ``reason`` when undefined (tpr + tnr <= 1).

    From ``corrected_rate_interval`` also: ``method`` (``"rogan-gladen-mover"``), ``tpr`` and
    ``tnr`` (the calibration estimates), ``raw`` (the clustered interval of the judge's
    observed verdicts, ``clustered_rate_interval``), each None when not computed.
    """

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
    """Rogan–Gladen estimator (Rogan & Gladen 1978, "Estimating prevalence from the results of
    a screening test", Am. J. Epidemiol. 107(1):71–76). Superseded for display by
    ``corrected_rate_interval``: this interval treats the run's trials as independent (pooled
    binomial), so it can be narrower than the raw clustered interval, and with a perfect
    calibration (tpr or tnr = 1) it counts the judge's error rate as known exactly.

        θ = (p_obs + tnr − 1) / (tpr + tnr − 1),  clipped to [0, 1]

    with ``observed`` p_obs the judge's pass rate on the run, ``tpr`` = P(judge pass | human
    pass) (1 − false-reject rate) and ``tnr`` = P(judge fail | human fail) (1 − false-accept
    rate), all proportions in [0, 1]. Undefined when tpr + tnr <= 1 (the judge is no better
    than chance: the denominator J = Youden's index is <= 0).

    Interval (when ``n_observed`` trials, ``n_pass`` human passes and ``n_fail`` human
    fails behind the three proportions are given): the delta method treating the three
    proportions as independent binomials (Greenland 1996, "Basic methods for sensitivity
    analysis of biases", Int. J. Epidemiol. 25(6); Reiczigel, Földi & Ózsvári 2010,
    Epidemiol. Infect. 138(11), eq. 2), with J = tpr + tnr − 1 and θ unclipped:

        var(θ) = [p(1−p)/n_obs + θ² tpr(1−tpr)/n_pass + (1−θ)² tnr(1−tnr)/n_fail] / J²

    and a normal interval clipped to [0, 1]. Raises ValueError for a value outside [0, 1]
    or a non-positive sample size.
    """
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
    """Rogan–Gladen-corrected mean per-case pass rate with an interval clustered by case that
    includes the uncertainty of the judge's TPR and TNR.

    ``passed[i]`` of ``graded[i]`` ok judge verdicts on case i were passes (as in
    ``clustered_rate_interval``). ``tp, fn, tn, fp``: the judge's calibration counts against
    human labels (tp = judge pass & human pass, fn = judge fail & human pass, tn = judge fail
    & human fail, fp = judge pass & human fail), taken as independent of the run.

    **Estimand**: the mean per-case *true* (human-standard) pass rate θ of the population of
    cases, when the judge passes a truly passing trial with probability TPR and a truly failing
    one with probability 1 − TNR, the same on every case. Then each case's judge pass rate is
    ``q_i = (1 − TNR) + J·p_i`` (J = TPR + TNR − 1, Youden's index) and θ = (E q − (1 − TNR)) / J.

    **Estimate** (Rogan & Gladen 1978): ``θ̂ = (q̂ + tnr − 1) / (tpr + tnr − 1)`` with q̂ the mean
    of per-case judge pass rates, tpr = tp/(tp + fn), tnr = tn/(tn + fp); clipped to [0, 1]
    (``clipped`` says so).

    **Interval**: MOVER, the method of variance estimates recovery (Zou & Donner 2008,
    "Construction of confidence limits about effect measures: a general approach", Stat. Med.
    27(10):1693–1702; Newcombe 2011), over the three independent inputs of θ̂. Each input is
    moved alone to its own confidence limits, the others held at their estimates:

    * q to the limits [q_L, q_U] of ``clustered_rate_interval`` (Korn–Graubard, clustered by
      case): θ moves by ``(q̂ − q_L)/Ĵ`` down and ``(q_U − q̂)/Ĵ`` up;
    * tpr, then tnr, to their Wilson score limits (Wilson 1927) from the calibration counts:
      θ̂ evaluated at each limit (±∞ where the limit makes tpr + tnr ≤ 1, i.e. the judge might
      be no better than chance; the interval then reaches 0 or 1 on that side).

    With ``d⁻_j``, ``d⁺_j`` how far input j moves θ down and up (0 if it does not),
    ``low = θ̂ − sqrt(Σ d⁻_j²)``, ``high = θ̂ + sqrt(Σ d⁺_j²)`` around the unclipped θ̂, then
    clipped to [0, 1]. This is the delta method of Greenland (1996) and Reiczigel, Földi &
    Ózsvári (2010, eq. 2) with each binomial term replaced by an asymmetric score interval —
    which, like the pseudo-counts of Lang & Reiczigel (2014, "Confidence limits for prevalence
    of disease adjusted for estimated sensitivity and specificity", Prev. Vet. Med. 113:13–22),
    keeps a calibration of 24/24 from counting as certainty — and the pooled binomial term
    replaced by the clustered interval.

    **Never more certain than the raw rate**: the interval contains the Rogan–Gladen image
    ``[(q_L + tnr − 1)/Ĵ, (q_U + tnr − 1)/Ĵ]`` of the raw interval (clipped), and its width is
    never below ``min(1, (q_U − q_L)/Ĵ)``: where clipping at 0 or 1 would make it narrower
    (the judge's pass rate below its estimated false-accept rate, say), it is widened away
    from that bound. ``se``: the delta-method SE from the same pieces (raw ``se``, binomial
    variances of tpr and tnr), descriptive only.

    Measured coverage of θ ≥ 0.950 (median 0.989) over 432 cells: θ ∈ {0.5, 0.8, 0.95}, case
    rates equal or Beta with mean θ and concentration 5, (TPR, TNR) ∈ {(0.9, 0.9), (0.95, 0.8),
    (0.99, 0.7)}, calibration of 30 or 100 labels split 70/30 or drawn at the true rate, C ∈
    {5, 12, 30} cases × k ∈ {3, 5} trials; 2,000 simulated suites per cell.

    **Undefined** (all None, ``reason`` says why): no cases; no human passes (tp + fn = 0) or
    no human fails (tn + fp = 0) among the calibration counts; tpr + tnr <= 1 (the judge is
    no better than chance). Raises ValueError for negative or non-integer calibration counts
    and as ``clustered_rate_interval`` does for the per-case counts.
    """
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
    """Unclipped (q + tnr − 1)/(tpr + tnr − 1); ±inf (the sign of the numerator) when the
    denominator is <= 0 — the limit as the judge approaches chance — and 0 for 0/0."""
    numerator, denominator = q + tnr - 1.0, tpr + tnr - 1.0
    if denominator > 0.0:
        return numerator / denominator
    if numerator == 0.0:
        return 0.0
    return math.copysign(math.inf, numerator)
