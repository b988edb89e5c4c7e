"""Fisher's exact test for a 2×2 table of counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import hypergeom

# Relative tolerance when comparing table probabilities (as R's fisher.test and scipy do).
_RELATIVE_TOLERANCE = 1 + 1e-7


def fisher_exact(table: Sequence[Sequence[int]], alternative: str = "two-sided") -> float:
    """p-value of Fisher's exact test for [[a, b], [c, d]]: a is hypergeometric given the margins
    (Fisher 1935; Agresti, *Categorical Data Analysis*, 3rd ed., §3.5). "greater": P(A ≥ a);
    "less": P(A ≤ a); "two-sided": tables no more probable than the observed (relative
    tolerance 1e-7). In (0, 1]. Raises ``ValueError`` for a table that is not 2×2 of
    non-negative integers, or an unknown ``alternative``."""
    try:
        (a, b), (c, d) = table
    except (TypeError, ValueError) as exc:
        raise ValueError("table must be [[a, b], [c, d]]") from exc
    cells = (a, b, c, d)
    if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in cells):
        raise ValueError("table cells must be integers")
    if min(cells) < 0:
        raise ValueError("table cells must be non-negative")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative: {alternative!r} (two-sided, greater, less)")
    total, successes, draws = a + b + c + d, a + c, a + b
    if total == 0 or successes in (0, total) or draws in (0, total):
        return 1.0
    dist = hypergeom(total, successes, draws)
    if alternative == "greater":
        return float(min(1.0, dist.sf(a - 1)))
    if alternative == "less":
        return float(min(1.0, dist.cdf(a)))
    lo, hi = max(0, draws - (total - successes)), min(successes, draws)
    support = np.arange(lo, hi + 1)
    pmf = dist.pmf(support)
    observed = dist.pmf(a)
    return float(min(1.0, pmf[pmf <= observed * _RELATIVE_TOLERANCE].sum()))
