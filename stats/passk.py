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
    """``1 − C(n−c, k) / C(n, k)`` (Chen et al. 2021, unbiased), computed as
    ``1 − Π_{i=n−c+1}^{n} (1 − k/i)``.
    Raises ``ValueError`` unless 0 <= c <= n and 1 <= k <= n."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_hat_k(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)`` (pass^k, Yao et al. 2024, "tau-bench"), as
    ``Π_{i=0}^{k−1} (c − i) / (n − i)``. Raises ``ValueError`` unless 0 <= c <= n, 1 <= k <= n."""
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
    """pass^k over a suite with an interval clustered by case, never of zero width.

    ``passed[i]`` of ``graded[i]`` (>= k) trials of case i passed. Estimate: the mean of
    ``C(c_i, k) / C(n_i, k)``. Interval: case i holds ``floor(n_i / k)`` disjoint blocks of k
    trials, each passing wholly with probability p_i^k, so ``korn_graubard_interval`` applies
    on those block counts, centred on the unbiased estimates (their Rao–Blackwell improvement:
    resting on blocks is conservative). k = 1 is ``clustered_rate_interval``. Coverage:
    ``bench/bench_intervals.py --part passk``. The pass rate's limitation holds (no spread
    seen: the binomial interval of the blocks). ``n_effective``: effective blocks. No cases:
    all None. Raises ``ValueError`` unless counts are integers, 0 <= passed <= graded,
    k >= 1 and graded >= k."""
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
    """pass@k as one minus pass^k of the failures: ``C(n_i − c_i, k) / C(n_i, k)`` through
    ``pass_hat_k_interval``'s construction, (low, high) mapped to ``(1 − high, 1 − low)``.
    Inputs and errors as ``pass_hat_k_interval``."""
    x, n = _counts(passed, graded, k)
    estimates = np.array([pass_at_k(int(b), int(a), k) for a, b in zip(x, n, strict=True)])
    return pass_at_k_interval_from_estimates(estimates, n, k, confidence=confidence)


def pass_hat_k_interval_from_estimates(
    estimates: np.ndarray, graded: np.ndarray, k: int, *, confidence: float = 0.95
) -> ClusteredMean:
    """``pass_hat_k_interval`` from precomputed ``pass_hat_k`` estimates (range-checked only)."""
    blocks = np.asarray(graded) // k
    return korn_graubard_interval(estimates, blocks, confidence=confidence)


def pass_at_k_interval_from_estimates(
    estimates: np.ndarray, graded: np.ndarray, k: int, *, confidence: float = 0.95
) -> ClusteredMean:
    """``pass_at_k_interval`` from precomputed ``pass_at_k`` estimates (range-checked only)."""
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
    """Head − base of two estimates in [0, 1] from each side's interval, never of zero width;
    (None, None) when a side has none. MOVER (Newcombe 1998, Stat. Med. 17(8):873–890,
    method 10; Zou & Donner 2008, Stat. Med. 27(10):1693–1702):

        low  = δ̂ − sqrt((h − l_h)² + (u_b − b)²)
        high = δ̂ + sqrt((u_h − h)² + (b − l_b)²)

    clipped to [−1, 1]. It treats the sides as independent: runs sharing cases correlate
    positively, which makes it conservative (``tests/stats/test_passk_difference.py``)."""
    values = (base_mean, base_low, base_high, head_mean, head_low, head_high)
    if any(v is None for v in values):
        return None, None
    b, l_b, u_b, h, l_h, u_h = (float(v) for v in values)  # type: ignore[arg-type]
    delta = h - b
    low = delta - math.hypot(h - l_h, u_b - b)
    high = delta + math.hypot(u_h - h, b - l_b)
    return max(-1.0, low), min(1.0, high)
