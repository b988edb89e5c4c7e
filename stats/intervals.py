"""Confidence intervals for pass rates: Wilson for one binomial, clustered for a suite.

Pure functions (numpy/scipy only). Undefined quantities are ``None``, never NaN.

``clustered_rate_interval`` is the suite interval to show: a small-sample interval for the
mean of per-case pass rates that is never of zero width. ``clustered_mean`` /
``clustered_mean_of_rates`` are the plain cluster-robust normal interval (Miller 2024), kept
for comparison; it collapses to zero width whenever the observed case rates are all equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

import numpy as np


def _special() -> ModuleType:
    """``scipy.special``, imported on first use: this module is imported by every process
    (through ``evals.selectors``), and scipy costs about 0.7 s and tens of MB to import
    (``scipy.stats`` 2 s more), which a worker or ``run_suite --wait`` never needs."""
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
    ``method`` names the interval (``"korn-graubard"``, ``"clopper-pearson-one-case"``,
    ``"miller-normal"``, ``""`` when there is none); ``n_effective`` is the effective number of
    independent trials the interval rests on (``clustered_rate_interval`` only, else None).

    From ``clustered_mean``: ``mean`` is None when ``n_cases = 0``; ``se`` and the interval are
    None when ``n_cases < 2``. From ``clustered_rate_interval``: everything but ``mean`` is
    None only when ``n_cases = 0``, and ``ci_low < ci_high`` always.
    """

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
    """Mean of per-case pass rates with a cluster-robust SE and a normal interval clipped to [0, 1].

    Superseded for display by ``clustered_rate_interval``: this interval has zero width whenever
    the observed case rates are all equal (0/240, or three cases at 1/5 each) and covers far
    below 95% for small suites.

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
    """Clopper–Pearson ("exact") interval (Clopper & Pearson 1934) for ``successes`` of ``n``,
    as (low, high) in [0, 1], from beta quantiles:

        low = B⁻¹(α/2; x, n − x + 1) (0 when x = 0),  high = B⁻¹(1 − α/2; x + 1, n − x)
        (1 when x = n),  α = 1 − confidence.

    Integer counts give statsmodels ``proportion_confint(method="beta")``. Real-valued
    ``successes`` and ``n`` are allowed (Korn & Graubard's effective counts; the beta
    quantiles are defined for any positive parameters). ``n > 0`` always gives ``low < high``.
    Raises ValueError unless ``0 <= successes <= n`` and ``n > 0``.
    """
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
    """Mean of per-case pass rates with a small-sample interval clustered by case that is never
    of zero width (``ci_low < ci_high``, also at 0/240, 240/240 and with one case).

    ``passed[i]`` of ``graded[i]`` trials of case i passed (integers, ``graded[i] >= 1``; trial
    counts may differ between cases — drop cases with no graded trial first).

    **Estimand.** The mean per-case pass rate μ of the population of cases the suite's cases
    are drawn from (the "in general" reading of Miller 2024, "Adding Error Bars to Evals",
    arXiv:2411.00640): each case has its own pass rate p_i, each of its trials passes with
    probability p_i. When every case shares one rate, μ is that rate; when the rates are
    fixed constants, μ is their mean (the interval then covers at least as often, since
    between-case spread only widens it). Point estimate ``m = (1/C) Σ x_i/n_i``.

    **Interval** (Korn & Graubard 1998, "Confidence intervals for proportions with small
    expected number of positive counts estimated from survey data", Survey Methodology
    24(2):193–201: a Clopper–Pearson interval on an effective sample size, cases as primary
    sampling units). With C cases, n_i trials of case i:

    * ``n_K = C² / Σ 1/n_i`` — Kish's (1965, "Survey Sampling") effective size of the
      case-weighted mean if all trials were independent; the total trial count when the n_i
      are equal. The interval never rests on more than n_K trials: it is never narrower than
      the exact binomial interval of all trials.
    * ``V = s² / C`` — the clustered variance of m (Miller 2024; s² the ddof = 1 sample
      variance of the per-case rates). Design effect ``deff = V / (m(1 − m)/(n_K − 1))``
      (the SAS SURVEYFREQ convention) and ``n_D = n_K / deff``.
    * Degrees-of-freedom penalty (Korn & Graubard 1998): ``n_Ddf = n_D · (t_{n_K−1} /
      t_{C−1})²``, t the two-sided Student quantiles: the variance comes from C cases only.
    * ``n* = min(n_K, n_Ddf)`` (``n* = n_K`` when V = 0 or m ∈ {0, 1}, where no design
      effect can be estimated), ``x* = m · n*``, and the interval is the Clopper–Pearson
      interval of x* successes in n* trials (``clopper_pearson_interval``; beta quantiles
      with real parameters).

    So the interval is the wider of two honest readings: the exact binomial interval as if
    all trials were independent, and the small-sample (t with C − 1 df) clustered interval.
    Korn & Graubard apply the df penalty also to the n_K cap; capping after the penalty (as
    here) is narrower at small C (by up to a third at C = 3) and its measured coverage of μ
    was ≥ 0.958 in every cell of the benchmark (C ∈ {3, 5, 12, 30} × k ∈ {1, 3, 5, 10} ×
    case rates all equal at 0, 0.01, 0.05, 0.2, 0.5, 0.95, 0.99 or 1, or drawn U(0, 1) or
    U(0.8, 1); 2,000 simulated suites per cell, Monte Carlo SE 0.5 points). With one trial per
    case the interval is exactly the Clopper–Pearson interval of the C outcomes, exact for μ.

    **One case** (C = 1): the Clopper–Pearson interval of its trials (``method
    "clopper-pearson-one-case"``). It estimates that case's rate; one case says nothing
    about how cases differ, so it is not an interval for a population of cases.

    **Limitation.** When every observed case has the same rate (e.g. all pass), no
    between-case spread is seen and the interval is the binomial one of all trials. A case
    population with rare always-failing cases (say 10% of cases never pass) shows up as
    "all pass" in 0.9^C of suites; then the interval misses μ (measured coverage about 0.71
    with 12 such cases and k >= 3, 0.41 with 5 cases and k = 10; 0.74 with 3 cases when half
    the cases always pass). Only more cases fix that; the interval for the mean rate of *these*
    cases (every case's own rate fixed) is unaffected (coverage 1.000 there).

    ``se = sqrt(max(V, m(1 − m)/n_K))`` (the clustered SE, never below the binomial SE of all
    trials; 0 when m ∈ {0, 1} — show the interval, which never collapses). ``n_effective =
    n*``. No cases: everything None. Raises ValueError for mismatched shapes, non-integer
    counts, ``graded < 1`` or ``passed`` outside [0, graded], or confidence outside (0, 1).
    """
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
    """The Korn–Graubard interval of ``clustered_rate_interval`` for the mean of per-case
    estimates of a probability, each resting on its own number of independent Bernoulli trials.

    ``estimates[i]`` in [0, 1]: case i's unbiased estimate of its probability (its pass rate
    x_i/n_i for the pass rate; ``stats.passk`` passes the pass^k estimators with their
    ``floor(n_i/k)`` blocks of k trials); ``trials[i] >= 1`` (real): the number of
    independent Bernoulli trials of that probability the estimate is worth. The construction
    (Kish size ``n_K = C² / Σ 1/trials_i``, clustered variance ``s²/C`` of the estimates,
    design effect, Korn–Graubard df penalty, Clopper–Pearson on ``n*`` effective trials
    centred on the mean estimate; one case: Clopper–Pearson of ``estimate · trials`` of
    ``trials``) and its reasoning are in ``clustered_rate_interval``'s docstring; with
    ``estimates = x/n`` and ``trials = n`` this *is* ``clustered_rate_interval``.
    ``ci_low < ci_high`` always. No cases: everything None. Raises ValueError for
    mismatched shapes, estimates outside [0, 1], ``trials < 1`` or non-finite values.
    """
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
    """Mean of per-case mean values (scores on any scale) with a t interval clustered by case.

    ``mean`` None when ``n_cases = 0``; ``se`` >= 0 and ``ci_low < ci_high`` when there is an
    interval; otherwise ``ci_low``/``ci_high`` (and ``se`` for one case) are None and ``note``
    says why in words a page can show ("no spread seen in 4 cases").
    """

    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    n_cases: int
    note: str = ""


def clustered_mean_interval(
    case_means: Sequence[float] | np.ndarray, *, confidence: float = 0.95
) -> MeanInterval:
    """Mean of per-case means with a Student-t interval clustered by case (scores on any scale).

    ``case_means[i]``: case i's mean score over its scored trials (finite floats; drop cases
    with no score first). Estimand: the mean per-case score of the population of cases.
    ``m = (1/C) Σ m_i``, ``SE = s / √C`` (s the ddof = 1 sample SD of the m_i: the clustered
    SE of Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, which also carries the
    within-case trial noise), interval ``m ± t_{C−1, 1−α/2} · SE`` (Student t with C − 1 df:
    the variance comes from C cases).

    **No interval rather than a false one.** Scores have no known range here, so nothing
    bounds the spread a suite has not shown: when every case has the same mean (``s = 0``)
    the t interval would have zero width, and with one case it is undefined. Then ``ci_low``
    and ``ci_high`` are None and ``note`` is ``"no spread seen in C cases"`` (``se`` 0) or
    ``"one case: spread between cases unknown"`` (``se`` None), so a page says so instead of
    printing a zero-width interval. (Pass/fail outcomes, where the range [0, 1] is known, have
    ``clustered_rate_interval``, which never collapses.) No cases: everything None.
    Raises ValueError for non-finite values or confidence outside (0, 1).
    """
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
