"""pass@k and pass^k: the unbiased per-case estimators from n trials with c passes
(``pass_at_k``, ``pass_hat_k``) and their suite means with an interval clustered by case
(``pass_at_k_interval``, ``pass_hat_k_interval``: the Korn–Graubard interval of
``stats.intervals`` on disjoint blocks of k trials)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from stats.intervals import ClusteredMean, korn_graubard_interval


def _check(n: int, c: int, k: int) -> None:
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise ValueError(f"n, c and k must be integers, got n={n!r}, c={c!r}, k={k!r}")
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k trials drawn without replacement from n passes:
    ``1 − C(n−c, k) / C(n, k)`` (Chen et al. 2021, "Evaluating Large Language Models Trained
    on Code", the unbiased estimator), computed in the stable product form
    ``1 − Π_{i=n−c+1}^{n} (1 − k/i)``. Raises ValueError unless 0 <= c <= n and 1 <= k <= n.
    """
    _check(n, c, k)
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Probability that all k trials drawn without replacement from n pass:
    ``C(c, k) / C(n, k)`` (pass^k, Yao et al. 2024, "tau-bench"), computed as
    ``Π_{i=0}^{k−1} (c − i) / (n − i)``. Raises ValueError unless 0 <= c <= n and 1 <= k <= n.
    """
    _check(n, c, k)
    if c < k:
        return 0.0
    return math.prod((c - i) / (n - i) for i in range(k))


def pass_hat_k_interval(
    passed: Sequence[int] | np.ndarray,
    graded: Sequence[int] | np.ndarray,
    k: int,
    *,
    confidence: float = 0.95,
) -> ClusteredMean:
    """pass^k over a suite with its interval clustered by case (never of zero width).

    ``passed[i]`` of ``graded[i]`` trials of case i passed (integers, every ``graded[i] >= k``:
    drop cases with fewer trials first); ``k >= 1``. Estimand: the mean over the population of
    cases of p_i^k, the chance that k fresh trials of a case all pass.

    **Point estimate** (``mean``): the mean of the unbiased per-case estimators
    ``C(c_i, k) / C(n_i, k)`` (``pass_hat_k``; Yao et al. 2024, "tau-bench").

    **Interval**: the block view. Case i's n_i trials hold ``b_i = floor(n_i / k)`` disjoint
    blocks of k trials; a block passes entirely with probability p_i^k, independently of the
    other blocks, so the blocks are Bernoulli trials of exactly the quantity of interest. The
    Korn–Graubard interval of ``stats.intervals.clustered_rate_interval`` (Clopper–Pearson on an
    effective size; its docstring has the construction and its coverage) is applied to that
    view: per-case trial counts b_i, centred on the unbiased estimate, with the clustered
    variance of the unbiased per-case estimates. The unbiased estimator is the Rao–Blackwell
    improvement of the block estimator (its conditional mean given c_i over the arrangements
    of the trials), so its variance is at most the block estimator's; the effective size never
    exceeds the Kish size of the blocks, so resting the interval on blocks is conservative.
    With k = 1 the blocks are the trials and this *is* ``clustered_rate_interval`` (same
    numbers). With k = n_i for every case each case is one Bernoulli outcome and the interval is
    the Clopper–Pearson interval of the cases that passed all k.

    Measured coverage (``bench/bench_intervals.py --part passk``, 2,000 suites per cell): at
    least 0.951 ± 0.005 for pass^k and 0.958 ± 0.005 for pass@k in every cell of C ∈ {3, 5,
    12, 30} cases × n ∈ {3, 5, 10} trials × k ∈ {1, 2, 3, n} × case rates all equal at 0.5,
    0.9, 0.02, 0.98 or 1, drawn once from U(0.2, 1), or redrawn each suite (population truth);
    exact coverage ≥ 0.95 by enumeration for 3 cases × 3 trials on a grid of equal rates.

    ``ci_low < ci_high`` always (also when every case has pass^k 1 or 0); ``n_effective``: the
    effective number of blocks. Limitation as for the pass rate: when every case shows the same
    estimate, no between-case spread is seen and the interval is the binomial one of all blocks.
    No cases: everything None. Raises ValueError unless the counts are integers with
    ``0 <= passed <= graded``, ``k >= 1`` and ``graded >= k``.
    """
    x, n = _counts(passed, graded, k)
    estimates = np.array([pass_hat_k(int(b), int(a), k) for a, b in zip(x, n, strict=True)])
    return pass_hat_k_interval_from_estimates(estimates, n, k, confidence=confidence)


def pass_at_k_interval(
    passed: Sequence[int] | np.ndarray,
    graded: Sequence[int] | np.ndarray,
    k: int,
    *,
    confidence: float = 0.95,
) -> ClusteredMean:
    """pass@k over a suite with its interval clustered by case (never of zero width).

    Inputs and errors as ``pass_hat_k_interval``. Estimand: ``1 − mean_i (1 − p_i)^k``, the
    chance that at least one of k fresh trials of a case passes, averaged over cases.
    pass@k is one minus the mean chance that all k trials *fail*, which is pass^k of the
    failures: the per-case unbiased estimators ``C(n_i − c_i, k) / C(n_i, k)`` (one minus
    Chen et al.'s 2021 pass@k estimator) go through the same block construction
    (``pass_hat_k_interval``: ``floor(n_i / k)`` disjoint blocks, each failing entirely with
    probability (1 − p_i)^k), and the interval (low, high) of that mean maps back to
    ``(1 − high, 1 − low)``; ``mean`` is ``1 − `` its mean. With k = 1 this is
    ``clustered_rate_interval`` (equal up to floating-point rounding: Clopper–Pearson is
    symmetric in successes and failures).
    """
    x, n = _counts(passed, graded, k)
    estimates = np.array([pass_at_k(int(b), int(a), k) for a, b in zip(x, n, strict=True)])
    return pass_at_k_interval_from_estimates(estimates, n, k, confidence=confidence)


def pass_hat_k_interval_from_estimates(
    estimates: np.ndarray, graded: np.ndarray, k: int, *, confidence: float = 0.95
) -> ClusteredMean:
    """``pass_hat_k_interval`` from the per-case pass^k estimators already computed
    (``estimates[i] = pass_hat_k(graded[i], passed[i], k)``; checked only for range)."""
    blocks = np.asarray(graded) // k
    return korn_graubard_interval(estimates, blocks, confidence=confidence)


def pass_at_k_interval_from_estimates(
    estimates: np.ndarray, graded: np.ndarray, k: int, *, confidence: float = 0.95
) -> ClusteredMean:
    """``pass_at_k_interval`` from the per-case pass@k estimators already computed
    (``estimates[i] = pass_at_k(graded[i], passed[i], k)``; checked only for range)."""
    fails = pass_hat_k_interval_from_estimates(
        1.0 - np.asarray(estimates, dtype=float), graded, k, confidence=confidence
    )
    if fails.mean is None or fails.ci_low is None or fails.ci_high is None:
        return fails
    return replace(
        fails,
        mean=min(max(1.0 - fails.mean, 0.0), 1.0),
        ci_low=1.0 - fails.ci_high,
        ci_high=1.0 - fails.ci_low,
    )


def _counts(
    passed: Sequence[int] | np.ndarray, graded: Sequence[int] | np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    x, n = np.asarray(passed), np.asarray(graded)
    if x.ndim != 1 or x.shape != n.shape:
        raise ValueError(f"passed and graded must be 1-D of one length, got {x.shape}, {n.shape}")
    if not (isinstance(k, int) and k >= 1):
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if x.size and not (x.dtype.kind in "iu" and n.dtype.kind in "iu"):
        raise ValueError("passed and graded must be integer counts")
    if np.any(n < k) or np.any(x < 0) or np.any(x > n):
        raise ValueError(f"need graded >= k = {k} and 0 <= passed <= graded for every case")
    return x, n


def difference_interval(
    base_mean: float | None,
    base_low: float | None,
    base_high: float | None,
    head_mean: float | None,
    head_low: float | None,
    head_high: float | None,
) -> tuple[float | None, float | None]:
    """Interval for head − base of two estimates in [0, 1] (pass^k or pass@k of two runs),
    from each side's own interval: ``(low, high)``, never of zero width; (None, None) when a
    side has no estimate or no interval.

    **Method**: MOVER, the method of variance estimates recovery (Newcombe 1998, "Interval
    estimation for the difference between independent proportions: comparison of eleven
    methods", Stat. Med. 17(8):873–890, method 10, the hybrid score interval; Zou & Donner
    2008, "Construction of confidence limits about effect measures: a general approach",
    Stat. Med. 27(10):1693–1702, for any two estimates with their own limits):

        δ̂    = h − b
        low  = δ̂ − sqrt((h − l_h)² + (u_b − b)²)
        high = δ̂ + sqrt((u_h − h)² + (b − l_b)²)

    clipped to [−1, 1]. Each side's limits are its clustered interval (``pass_hat_k_interval``
    / ``pass_at_k_interval``: Korn–Graubard on blocks of k trials), so the difference keeps
    their asymmetry near 0 and 1, where a Wald difference would not.

    **Independence**: the formula treats the sides as independent. Two runs of one suite share
    cases, and a case hard for the base is mostly hard for the head too: a positive
    correlation, under which the true variance of δ̂ is *smaller* than the sum, so the interval
    errs on the wide side (conservative). A negative correlation across cases (head good
    exactly where base is bad) would make it too narrow. Coverage measured in both the paired
    and the independent case: ``tests/stats/test_passk_difference.py``.

    Never of zero width: ``l_h < u_h`` and ``l_b < u_b`` (every interval of
    ``stats.passk`` is of positive width) make ``high − low`` > 0, and clipping keeps it so
    (δ̂ = −1 needs h = 0 < u_h; δ̂ = 1 needs h = 1 > l_h).
    """
    values = (base_mean, base_low, base_high, head_mean, head_low, head_high)
    if any(v is None for v in values):
        return None, None
    b, l_b, u_b, h, l_h, u_h = (float(v) for v in values)  # type: ignore[arg-type]
    delta = h - b
    low = delta - math.hypot(h - l_h, u_b - b)
    high = delta + math.hypot(u_h - h, b - l_b)
    return max(-1.0, low), min(1.0, high)
