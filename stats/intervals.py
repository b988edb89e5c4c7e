"""Confidence intervals for pass rates: Wilson for one binomial, clustered for a suite.

Pure functions (numpy/scipy only). Undefined quantities are ``None``, never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import norm


@lru_cache(maxsize=16)
def z_value(confidence: float) -> float:
    """Two-sided standard normal quantile: ``z = Phi^-1(1 - (1 - confidence) / 2)``
    (1.959964 for 0.95). Raises ValueError unless 0 < confidence < 1."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return float(norm.ppf(1.0 - (1.0 - confidence) / 2.0))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927) for ``successes`` out of ``n``, as (low, high) in [0, 1].

    ``center = (p + z²/2n) / (1 + z²/n)``,
    ``half = z / (1 + z²/n) * sqrt(p(1-p)/n + z²/4n²)``, with ``p = successes / n``; the same
    values as statsmodels ``proportion_confint(method="wilson")``. ``n = 0`` gives
    (0.0, 1.0): nothing is known. Raises ValueError unless ``0 <= successes <= n``.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    z = z_value(confidence)
    p = successes / n
    z2n = z * z / n
    center = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    # Clip, and keep the estimate inside despite rounding at p = 0 or 1.
    return (max(0.0, min(center - half, p)), min(1.0, max(center + half, p)))


@dataclass(frozen=True)
class ClusteredMean:
    """Mean of per-case pass rates with a cluster-robust standard error (cases are clusters).

    ``mean``, ``ci_low``, ``ci_high`` in [0, 1]; ``se`` >= 0; ``n_cases`` cases used.
    ``mean`` is None when ``n_cases = 0``; ``se`` and the interval are None when
    ``n_cases < 2`` (one cluster carries no information about between-case variance).
    """

    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    n_cases: int


def clustered_mean(
    cases: Sequence[float] | Sequence[Sequence[float | bool]], confidence: float = 0.95
) -> ClusteredMean:
    """Mean of per-case pass rates with a cluster-robust SE and a normal interval clipped to [0, 1].

    ``cases``: either per-case rates (floats in [0, 1]) or per-case outcome lists (0/1 or
    bools, one per graded trial; an empty list is refused — drop ungraded cases first).

    Formula (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, section on
    clustered standard errors): the estimate is ``m = (1/C) Σ_c m_c`` over the C per-case
    means ``m_c``, and

        SE = sqrt( Σ_c (m_c − m)² / (C (C − 1)) ) = sqrt( s² / C ),  s² the sample variance
        (ddof = 1) of the per-case means.

    With equal trials per case this is the paper's clustered SE
    ``sqrt((1/n²) Σ_c (Σ_i (s_ic − m))²)`` times the usual small-sample factor
    ``sqrt(C / (C − 1))`` — exactly statsmodels' OLS ``cov_type="cluster"`` (whose default
    correction is ``C/(C−1) · (N−1)/(N−K)`` with K = 1). With unequal trial counts the same
    clustered sandwich applied to the estimator we report (each case weighted once, i.e.
    observation weights ``1/n_c``; statsmodels WLS with ``cov_type="cluster"``) reduces to
    the same expression, so one formula covers both. Interval: ``m ± z·SE`` clipped to
    [0, 1]. ``C = 1``: SE undefined (0/0), so ``se`` and the interval are None.
    Raises ValueError for values outside [0, 1] or non-finite.
    """
    rates = np.array([_case_rate(i, c) for i, c in enumerate(cases)], dtype=float)
    return clustered_mean_of_rates(rates, confidence=confidence)


def clustered_mean_of_rates(rates: np.ndarray, *, confidence: float = 0.95) -> ClusteredMean:
    """``clustered_mean`` for a numpy array of per-case rates (already checked, in [0, 1])."""
    n_cases = int(rates.size)
    if n_cases == 0:
        return ClusteredMean(None, None, None, None, 0)
    mean = float(rates.mean())
    if n_cases < 2:
        return ClusteredMean(mean, None, None, None, n_cases)
    se = float(math.sqrt(float(rates.var(ddof=1)) / n_cases))
    half = z_value(confidence) * se
    return ClusteredMean(mean, se, max(0.0, mean - half), min(1.0, mean + half), n_cases)


def _case_rate(index: int, case: float | Sequence[float | bool]) -> float:
    if isinstance(case, Sequence | np.ndarray) and not isinstance(case, str):
        if len(case) == 0:
            raise ValueError(f"case {index}: empty outcome list (drop ungraded cases first)")
        values = [float(v) for v in case]
        if any(v not in (0.0, 1.0) for v in values):
            raise ValueError(f"case {index}: outcomes must be 0/1 or booleans")
        return sum(values) / len(values)
    value = float(case)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"case {index}: rate {case!r} is not in [0, 1]")
    return value
