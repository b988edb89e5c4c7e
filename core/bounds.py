"""Bounds of the numbers Assay accepts from outside (imports, ingest, run files, API bodies,
forms), in one place. A value outside them is refused naming the record and field, never
stored, never a server error (docs/ingest.md, "Numbers and their bounds").

- counts (tokens, attempts, seeds, sample sizes): whole numbers that fit the database's
  integer column, at most ``INT_MAX`` (2,147,483,647); seeds at least ``INT_MIN``;
- ``latency_ms``: milliseconds from 0 to ``LATENCY_MS_MAX`` (86,400,000: one day; a call
  that took longer is a unit mistake, e.g. microseconds), finite;
- ``cost_usd``: USD from 0 to below ``COST_USD_LIMIT`` (1,000,000), stored to 1e-12
  (``numeric(20, 12)``, ``COST_USD_DECIMAL_PLACES``); a positive cost that would be stored
  as 0 (below 5e-13: zero means free) is refused;
- scores: numbers in [0, 1].
"""

from __future__ import annotations

import math
from decimal import Decimal

from core.decimals import decimal_plain

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LATENCY_MS_MAX = 86_400_000
COST_USD_LIMIT = Decimal(10**6)

# How a cost is stored: ``numeric(COST_USD_MAX_DIGITS, COST_USD_DECIMAL_PLACES)`` (a trial's,
# a judge call's) and written out (API, CSV/Parquet exports). Every cost Assay computes is a
# whole number of 1e-12 USD (a price per 1M tokens has at most 6 decimals,
# ``evals.models.ModelPrice``; token counts are whole), so it is stored exactly and a tiny
# known cost never becomes 0 (3 tokens at $0.001 per 1M tokens: 3e-9 USD). With 8 decimals
# it did.
COST_USD_DECIMAL_PLACES = 12
COST_USD_MAX_DIGITS = 20
COST_USD_QUANTUM = Decimal(1).scaleb(-COST_USD_DECIMAL_PLACES)


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
    """None when ``value`` is a finite USD amount in [0, COST_USD_LIMIT) that is 0 or stays
    above 0 when stored (at least half of ``COST_USD_QUANTUM``, rounded half up), else the
    message, its amounts in plain decimals ("0.0000000000004", never "4E-13":
    ``core.decimals.decimal_plain``)."""
    if not (value.is_finite() and 0 <= value < COST_USD_LIMIT):
        shown = decimal_plain(value) if value.is_finite() else str(value)
        return f"expected USD from 0 to below {COST_USD_LIMIT:,}, got {shown}"
    if 0 < value < COST_USD_QUANTUM / 2:
        return (
            f"a known cost of {decimal_plain(value)} USD would be stored as 0 (which means "
            f"free): costs are stored to {decimal_plain(COST_USD_QUANTUM)} USD; give 0 or "
            "leave the cost empty (unknown)"
        )
    return None
