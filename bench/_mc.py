"""A Monte Carlo rate as text, with its simulation error, never a zero-width one.

``hits`` of ``n`` simulations is printed as ``p ± SE`` (the normal approximation,
SE = sqrt(p(1 − p)/n), rounded up so it never prints as zero). At 0 or ``n`` hits that SE is
0, so the exact one-sided 95% Clopper–Pearson bound is printed instead: ``0 (≤ b)`` or
``1 (≥ 1 − b)``, with b = 1 − 0.05^(1/n) (Clopper and Pearson 1934; for n = 2,000,
b = 0.0015).
"""

from __future__ import annotations

import math


def _up(value: float, digits: int) -> float:
    return math.ceil(value * 10**digits - 1e-9) / 10**digits


def _down(value: float, digits: int) -> float:
    return math.floor(value * 10**digits + 1e-9) / 10**digits


def mc_rate_text(hits: int, n: int, *, scale: float = 1.0, digits: int = 3) -> str:
    """``hits`` of ``n`` as text, times ``scale`` (100 for percent), ``digits`` after the
    point: ``"0.953 ± 0.005"``; ``"1.000 (≥ 0.998)"`` and ``"0.00 (≤ 0.15)"`` at the ends.
    Raises ``ValueError`` unless 0 ≤ hits ≤ n and n ≥ 1."""
    if n < 1 or not 0 <= hits <= n:
        raise ValueError(f"need 0 <= hits <= n and n >= 1 (got {hits} of {n})")
    p = hits / n
    if hits in (0, n):
        bound = 1 - 0.05 ** (1 / n)
        if hits == 0:
            return f"{0:.{digits}f} (≤ {_up(scale * bound, digits):.{digits}f})"
        return f"{scale:.{digits}f} (≥ {_down(scale * (1 - bound), digits):.{digits}f})"
    se = math.sqrt(p * (1 - p) / n)
    return f"{scale * p:.{digits}f} ± {_up(scale * se, digits):.{digits}f}"
