"""Decimals as text: plain positional notation, never an exponent.

A zero cost read back from a ``numeric(14, 8)`` column (or made by ``quantize``) is
``Decimal("0E-8")``; ``str()`` of it prints ``0E-8``, which no person and few tools read as
zero. Every place that turns a Decimal into text (pages, CSV, JSON, command output) goes
through ``decimal_plain``: ``Decimal("0E-8")`` -> ``"0.00000000"``, ``Decimal("1.2E+3")`` ->
``"1200"``; the value is kept exactly (no rounding, trailing zeros kept). Money shown to a
person goes through ``core.money`` (significant digits for small amounts).
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
