"""Decimals as text: plain positional notation, never an exponent.

A zero cost read back from a ``numeric(14, 8)`` column (or made by ``quantize``) is
``Decimal("0E-8")``; ``str()`` of it prints ``0E-8``, which no person and few tools read as
zero. Every place that turns a Decimal into text (pages, CSV, JSON, command output) goes
through ``decimal_plain``: ``Decimal("0E-8")`` -> ``"0.00000000"``, ``Decimal("1.2E+3")`` ->
``"1200"``; the value is kept exactly (no rounding, trailing zeros kept).
"""

from __future__ import annotations

from decimal import Decimal


def decimal_plain(value: Decimal) -> str:
    """``value`` in positional notation with its exact digits (``"0.00000000"``, never
    ``"0E-8"``). Raises ``ValueError`` for NaN or an infinity (callers map those to null)."""
    if not value.is_finite():
        raise ValueError(f"not a finite decimal: {value}")
    text = format(value, "f")
    return "0" + text[2:] if text.startswith("-0") and not value else text


def usd_plain(value: Decimal | str | float | int) -> str:
    """US dollars, exactly and plainly: ``"$0.00001234"``, ``"$1.50"``, ``"$0.00"`` (trailing
    zeros trimmed to at least two decimals; never an exponent)."""
    amount = Decimal(str(value)) if not isinstance(value, Decimal) else value
    text = decimal_plain(amount)
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    return f"${whole}.{frac}"
