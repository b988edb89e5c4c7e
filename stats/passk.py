"""Unbiased per-case estimators of pass@k and pass^k from n trials with c passes."""

from __future__ import annotations

import math


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
