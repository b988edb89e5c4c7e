"""Bounds of the numbers Assay accepts from outside (imports, ingest, run files, API bodies,
forms), in one place. A value outside them is refused naming the record and field, never
stored, never a server error (docs/ingest.md, "Numbers and their bounds").

- counts (tokens, attempts, seeds, sample sizes): whole numbers that fit the database's
  integer column, at most ``INT_MAX`` (2,147,483,647); seeds at least ``INT_MIN``;
- ``latency_ms``: milliseconds from 0 to ``LATENCY_MS_MAX`` (86,400,000: one day; a call
  that took longer is a unit mistake, e.g. microseconds), finite;
- ``cost_usd``: USD from 0 to below ``COST_USD_LIMIT`` (1,000,000), stored to 1e-8
  (``numeric(14, 8)``);
- scores: numbers in [0, 1].
"""

from __future__ import annotations

import math
from decimal import Decimal

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LATENCY_MS_MAX = 86_400_000
COST_USD_LIMIT = Decimal(10**6)


def latency_problem(value: float) -> str | None:
    """None when ``value`` (a number) is a latency in [0, LATENCY_MS_MAX] ms, else the
    message to show ("expected milliseconds from 0 to 86,400,000 (one day), got 1e+308")."""
    if math.isfinite(value) and 0 <= value <= LATENCY_MS_MAX:
        return None
    return f"expected milliseconds from 0 to {LATENCY_MS_MAX:,} (one day), got {value:g}"


def count_problem(value: int, *, minimum: int = 0) -> str | None:
    """None when ``value`` (an int) is in [minimum, INT_MAX], else the message to show."""
    if minimum <= value <= INT_MAX:
        return None
    return f"expected a whole number from {minimum} to {INT_MAX:,}, got {value}"


def cost_problem(value: Decimal) -> str | None:
    """None when ``value`` is a finite USD amount in [0, COST_USD_LIMIT), else the message."""
    if value.is_finite() and 0 <= value < COST_USD_LIMIT:
        return None
    return f"expected USD from 0 to below {COST_USD_LIMIT:,}, got {value}"
