"""Correcting an observed pass rate for a judge's measured error (Rogan–Gladen).

Pure functions (math/scipy only). Undefined results are None with a reason, never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stats.intervals import z_value


@dataclass(frozen=True)
class CorrectedRate:
    """Rogan–Gladen estimate of the true pass rate, in [0, 1].

    ``estimate`` is clipped to [0, 1] (``clipped`` says whether it was); ``ci_low``/``ci_high``
    a delta-method normal interval, clipped to [0, 1]; ``se`` its standard error (None when
    no sample sizes were given). All None with ``reason`` when undefined (tpr + tnr <= 1).
    """

    estimate: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    clipped: bool
    reason: str = ""


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
    a screening test", Am. J. Epidemiol. 107(1):71–76):

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
    if any(n is None for n in sizes):
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
