"""Confidence intervals for pass rates: Wilson for one binomial, clustered for a suite.
Undefined quantities are None, never NaN. ``clustered_rate_interval`` is the one shown;
``clustered_mean`` (Miller 2024's normal interval) collapses when case rates are equal."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

import numpy as np


def _special() -> ModuleType:
    """``scipy.special`` on first use: every process imports this module, and scipy costs ~0.7 s
    and tens of MB that a worker never needs."""
    from scipy import special  # noqa: PLC0415 - see the docstring

    return special


@lru_cache(maxsize=16)
def z_value(confidence: float) -> float:
    """Two-sided standard normal quantile: ``z = Phi^-1(1 - (1 - confidence) / 2)``
    (1.959964 for 0.95). Raises ValueError unless 0 < confidence < 1."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    # scipy.stats.norm.ppf is scipy.special.ndtri for the standard normal.
    return float(_special().ndtri(1.0 - (1.0 - confidence) / 2.0))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927), (low, high) in [0, 1], p = successes / n:
    ``center = (p + z²/2n) / (1 + z²/n)``, ``half = z / (1 + z²/n) * sqrt(p(1-p)/n + z²/4n²)``
    (as statsmodels ``method="wilson"``). n = 0: (0.0, 1.0). Raises ``ValueError`` unless
    0 <= successes <= n."""
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
    """Mean of per-case rates with a clustered SE. ``mean``, ``ci_low``, ``ci_high`` in [0, 1];
    ``method`` ("korn-graubard", "clopper-pearson-one-case", "miller-normal", ""); ``n_effective``
    (``clustered_rate_interval`` only). ``clustered_mean``: no interval under 2 cases;
    ``clustered_rate_interval``: ``ci_low < ci_high`` whenever there are cases."""

    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    n_cases: int
    method: str = ""
    n_effective: float | None = None


def clustered_mean(
    cases: Sequence[float | Sequence[float | bool]], confidence: float = 0.95
) -> ClusteredMean:
    """Mean of per-case rates ``m = (1/C) Σ m_c`` with the clustered SE of Miller 2024 ("Adding
    Error Bars to Evals", arXiv:2411.00640):

        SE = sqrt( Σ_c (m_c − m)² / (C (C − 1)) )

    (statsmodels' OLS/WLS ``cov_type="cluster"`` with weights 1/n_c), ``m ± z·SE`` clipped.
    ``cases``: rates, or per-case outcome lists (non-empty). C = 1: no SE or interval. Raises
    ``ValueError`` for values outside [0, 1] or non-finite."""
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
    return ClusteredMean(
        mean, se, max(0.0, mean - half), min(1.0, mean + half), n_cases, "miller-normal"
    )


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


def clopper_pearson_interval(
    successes: float, n: float, confidence: float = 0.95
) -> tuple[float, float]:
    """Clopper–Pearson interval (Clopper & Pearson 1934), α = 1 − confidence:

        low = B⁻¹(α/2; x, n − x + 1) (0 when x = 0),  high = B⁻¹(1 − α/2; x + 1, n − x) (1 at n)

    Real ``successes`` and ``n`` allowed (effective counts); ``low < high`` for n > 0. Raises
    ``ValueError`` unless 0 <= successes <= n and n > 0."""
    if not (math.isfinite(n) and n > 0 and 0 <= successes <= n):
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes!r}, {n!r}")
    return _clopper_pearson(float(successes), float(n), 1.0 - _check_confidence(confidence))


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return confidence


def _clopper_pearson(x: float, n: float, alpha: float) -> tuple[float, float]:
    x = min(max(x, 0.0), n)
    p = x / n
    special = _special()
    low = 0.0 if x <= 0.0 else float(special.betaincinv(x, n - x + 1.0, alpha / 2.0))
    high = 1.0 if x >= n else float(special.betaincinv(x + 1.0, n - x, 1.0 - alpha / 2.0))
    # Keep the estimate inside despite rounding.
    return (min(low, p), max(high, p))


def _t_quantile(df: float, confidence: float) -> float:
    """Two-sided Student t quantile ``t_{df, 1 − α/2}`` (scipy.special.stdtrit, no overhead)."""
    return float(_special().stdtrit(df, 1.0 - (1.0 - confidence) / 2.0))


def clustered_rate_interval(
    passed: Sequence[int] | np.ndarray,
    graded: Sequence[int] | np.ndarray,
    *,
    confidence: float = 0.95,
) -> ClusteredMean:
    """Mean of per-case pass rates with a small-sample interval clustered by case, never of zero
    width. ``passed[i]`` of ``graded[i]`` (>= 1) trials of case i passed.

    Estimand: the population mean per-case rate μ (Miller 2024); estimate m = (1/C) Σ x_i/n_i.
    Interval: Korn & Graubard (1998, Survey Methodology 24(2):193–201), Clopper–Pearson on an
    effective size, cases as clusters:

    * ``n_K = C² / Σ 1/n_i`` (Kish 1965): never rest on more than n_K trials;
    * ``V = s² / C``, ``deff = V / (m(1 − m)/(n_K − 1))`` (SAS SURVEYFREQ), ``n_D = n_K / deff``;
    * ``n_Ddf = n_D · (t_{n_K−1} / t_{C−1})²`` (the variance rests on C cases);
    * ``n* = min(n_K, n_Ddf)`` (n_K when V = 0 or m ∈ {0, 1}); Clopper–Pearson of m · n* in n*.

    Capping after the df penalty is narrower than Korn & Graubard at small C; measured coverage
    stayed >= 0.958 (bench/README.md). One case: Clopper–Pearson of its trials.

    **Limitation.** When every observed case has the same rate no between-case spread is seen
    and the interval is the binomial one; a population with rare always-failing cases shows up
    as "all pass" in 0.9^C of suites and the interval then misses μ (coverage ~0.71 at 12 such
    cases). Only more cases fix that; for *these* cases' mean it is unaffected.

    ``se = sqrt(max(V, m(1 − m)/n_K))``; ``n_effective = n*``. No cases: all None. Raises
    ``ValueError`` for mismatched shapes, non-integer counts, ``graded < 1``, ``passed``
    outside [0, graded], or confidence outside (0, 1)."""
    _check_confidence(confidence)
    x = np.asarray(passed)
    n = np.asarray(graded)
    if x.ndim != 1 or x.shape != n.shape:
        raise ValueError(f"passed and graded must be 1-D of one length, got {x.shape}, {n.shape}")
    n_cases = int(n.size)
    if n_cases == 0:
        return ClusteredMean(None, None, None, None, 0)
    if not (_is_integral(x) and _is_integral(n)):
        raise ValueError("passed and graded must be integer counts")
    x = x.astype(float)
    n = n.astype(float)
    if np.any(n < 1) or np.any(x < 0) or np.any(x > n):
        raise ValueError("need graded >= 1 and 0 <= passed <= graded for every case")
    return korn_graubard_interval(x / n, n, confidence=confidence)


def korn_graubard_interval(
    estimates: np.ndarray, trials: np.ndarray, *, confidence: float = 0.95
) -> ClusteredMean:
    """``clustered_rate_interval``'s construction for the mean of per-case estimates
    ``estimates[i]`` in [0, 1], each worth ``trials[i]`` >= 1 (real) Bernoulli trials (pass^k
    passes ``floor(n_i/k)`` blocks). ``estimates = x/n``, ``trials = n`` is exactly
    ``clustered_rate_interval``. Raises ``ValueError`` for mismatched shapes, estimates
    outside [0, 1], ``trials < 1`` or non-finite values."""
    _check_confidence(confidence)
    rates = np.asarray(estimates, dtype=float)
    n = np.asarray(trials, dtype=float)
    if rates.ndim != 1 or rates.shape != n.shape:
        raise ValueError(
            f"estimates and trials must be 1-D of one length, got {rates.shape}, {n.shape}"
        )
    n_cases = int(n.size)
    if n_cases == 0:
        return ClusteredMean(None, None, None, None, 0)
    if not (np.all(np.isfinite(rates)) and np.all(np.isfinite(n))):
        raise ValueError("estimates and trials must be finite")
    if np.any(n < 1) or np.any(rates < 0) or np.any(rates > 1):
        raise ValueError("need trials >= 1 and 0 <= estimate <= 1 for every case")
    alpha = 1.0 - confidence
    if n_cases == 1:
        trials_one = float(n[0])
        mean = float(rates[0])
        low, high = _clopper_pearson(mean * trials_one, trials_one, alpha)
        se = math.sqrt(mean * (1.0 - mean) / trials_one)
        return ClusteredMean(mean, se, low, high, 1, "clopper-pearson-one-case", trials_one)
    mean = float(rates.mean())
    n_kish = n_cases * n_cases / float((1.0 / n).sum())
    var = float(rates.var(ddof=1)) / n_cases
    pq = mean * (1.0 - mean)
    n_star = n_kish
    if var > 0.0 and pq > 0.0:
        n_design = n_kish * pq / ((n_kish - 1.0) * var)
        ratio = _t_quantile(n_kish - 1.0, confidence) / _t_quantile(n_cases - 1.0, confidence)
        n_star = min(n_kish, n_design * ratio * ratio)
    low, high = _clopper_pearson(mean * n_star, n_star, alpha)
    se = math.sqrt(max(var, pq / n_kish))
    return ClusteredMean(min(max(mean, 0.0), 1.0), se, low, high, n_cases, "korn-graubard", n_star)


def _is_integral(values: np.ndarray) -> bool:
    if values.dtype.kind in "iu":
        return True
    if values.dtype.kind == "b":
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))


@dataclass(frozen=True)
class MeanInterval:
    """Mean of per-case means (any scale) with a clustered t interval; without one, ``note`` says
    why in words a page can show ("no spread seen in 4 cases")."""

    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    n_cases: int
    note: str = ""


def clustered_mean_interval(
    case_means: Sequence[float] | np.ndarray, *, confidence: float = 0.95
) -> MeanInterval:
    """``m = (1/C) Σ m_i``, ``SE = s / √C`` (Miller 2024), ``m ± t_{C−1, 1−α/2} · SE``. Scores
    have no known range, so with no spread (s = 0) or one case there is no interval:
    ``note`` "no spread seen in C cases" (``se`` 0) or "one case: spread between cases
    unknown" (``se`` None). No cases: all None. Raises ``ValueError`` for non-finite values or
    confidence outside (0, 1)."""
    _check_confidence(confidence)
    values = np.asarray(case_means, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"case_means must be 1-D, got shape {values.shape}")
    n_cases = int(values.size)
    if n_cases == 0:
        return MeanInterval(None, None, None, None, 0)
    if not np.all(np.isfinite(values)):
        raise ValueError("case means must be finite")
    mean = float(values.mean())
    if n_cases == 1:
        return MeanInterval(mean, None, None, None, 1, "one case: spread between cases unknown")
    se = float(math.sqrt(float(values.var(ddof=1)) / n_cases))
    half = _t_quantile(n_cases - 1.0, confidence) * se
    if float(np.ptp(values)) == 0.0 or not mean + half > mean - half:
        return MeanInterval(mean, 0.0, None, None, n_cases, f"no spread seen in {n_cases} cases")
    return MeanInterval(mean, se, mean - half, mean + half, n_cases)
