"""US dollars as text for people (``usd_text``; the ``usd`` and ``usd_signed`` filters). A
known non-zero cost never prints as zero (``$0.0000051``), no trailing zeros (``$0.29``,
``$0``), unknown (None) reads "unknown"."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

# Below $1: at least this many decimals ("$0.0112"), more when needed to show
# ``SIGNIFICANT_DIGITS`` significant digits of a small amount ("$0.0000051").
MIN_DECIMALS = 4
SIGNIFICANT_DIGITS = 2
# Enough for any amount the database holds (8 decimals) and for per-trial means of it.
MAX_DECIMALS = 16


def _decimal(amount: Decimal | float | int | str) -> Decimal:
    try:
        value = amount if isinstance(amount, Decimal) else Decimal(str(amount))
    except InvalidOperation as exc:
        raise ValueError(f"not an amount of USD: {amount!r}") from exc
    if not value.is_finite():
        raise ValueError(f"not a finite amount of USD: {amount!r}")
    return value


def usd_decimals(amount: Decimal) -> int:
    """Decimals to print ``amount`` with: 2 from $1 up; below, ``MIN_DECIMALS`` or as many
    as show ``SIGNIFICANT_DIGITS`` significant digits (at most ``MAX_DECIMALS``)."""
    size = abs(amount)
    if size >= 1:
        return 2
    if size == 0:
        return MIN_DECIMALS
    # adjusted() is the exponent of the leading digit: 0.0000051 -> -6.
    needed = -size.adjusted() + SIGNIFICANT_DIGITS - 1
    return min(max(MIN_DECIMALS, needed), MAX_DECIMALS)


def usd_text(amount: Decimal | float | int | str | None) -> str:
    """Dollars: "$12.34" from $1 up; below, two significant digits without trailing zeros
    ("$0.0112", "$0.29", "$0.0000051"); "$0", "-$0.50"; None -> "unknown". Raises
    ``ValueError`` for a value that is not a finite amount."""
    if amount is None:
        return "unknown"
    value = _decimal(amount)
    decimals = usd_decimals(value)
    rounded = value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN)
    if rounded == 0:
        return "$0"
    if decimals > 2:
        # Trailing zeros are dropped down to the decimals two significant digits need.
        keep = max(2, -abs(rounded).adjusted() + SIGNIFICANT_DIGITS - 1)
        while decimals > keep and rounded == rounded.quantize(Decimal(1).scaleb(1 - decimals)):
            decimals -= 1
    sign = "-" if rounded < 0 else ""
    return f"{sign}${abs(rounded):,.{decimals}f}"


def usd_known_text(known_usd: Decimal | None, unknown: int) -> str:
    """A sum of costs of which ``unknown`` are unknown: "$0.0012" (none unknown), "$0.0012
    known, 3 costs unknown", or, ``known_usd`` None (no cost known), "unknown (12 costs
    unknown)": never "$0" for a sum of unknowns."""
    costs = f"{unknown:,} cost{'' if unknown == 1 else 's'} unknown"
    if known_usd is None:
        return f"unknown ({costs})"
    if not unknown:
        return usd_text(known_usd)
    return f"{usd_text(known_usd)} known, {costs}"


def usd_signed_text(amount: Decimal | float | int | str | None) -> str:
    """A difference of dollars, signed: "+$0.0000051", "−$0.0040", "$0" for no change;
    None -> "unknown"."""
    if amount is None:
        return "unknown"
    value = _decimal(amount)
    if value == 0:
        return usd_text(value)
    return f"{'+' if value > 0 else '−'}{usd_text(abs(value))}"


def per_usd_text(value: float | None) -> str:
    """Three significant digits ("412 per $", "0.0412 per $"); None -> "unknown"."""
    if value is None:
        return "unknown"
    return f"{_significant(value, 3)} per $"


def _significant(value: float, digits: int) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, decimals)
    return f"{rounded:,.0f}" if decimals <= 0 else f"{rounded:,.{decimals}f}"
