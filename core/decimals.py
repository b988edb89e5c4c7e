"""Decimals as text: plain positional notation, never an exponent (within ``PLAIN_MAX_PLACES``).

A zero cost read back from a ``numeric(14, 8)`` column (or made by ``quantize``) is
``Decimal("0E-8")``; ``str()`` of it prints ``0E-8``, which no person and few tools read as
zero. Every place that turns a Decimal into text (pages, CSV, JSON, command output) goes
through ``decimal_plain``: ``Decimal("0E-8")`` -> ``"0.00000000"``, ``Decimal("1.2E+3")`` ->
``"1200"``; the value is kept exactly (no rounding, trailing zeros kept). Money shown to a
person goes through ``core.money`` (significant digits for small amounts).
"""

from __future__ import annotations

from decimal import Decimal

# Beyond this many places either side of the point, a value is shown in scientific form:
# anything stored or priced is far inside it, and a hostile "1e-999999999" stays short.
PLAIN_MAX_PLACES = 100


def decimal_plain(value: Decimal) -> str:
    """``value`` in positional notation with its exact digits (``"0.00000000"``, never
    ``"0E-8"``) while its digits lie within ``PLAIN_MAX_PLACES`` places of the point;
    beyond, ``str(value)`` (``"1E-999999999"``: as long as the value's own text). Raises
    ``ValueError`` for NaN or an infinity (callers map those to null)."""
    if not value.is_finite():
        raise ValueError(f"not a finite decimal: {value}")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # "n", "N" or "F" only for NaN and the infinities
    if exponent < -PLAIN_MAX_PLACES or value.adjusted() > PLAIN_MAX_PLACES:
        # "1e-999999999" written out is a gigabyte: past the bound, the short form.
        return str(value)
    text = format(value, "f")
    return "0" + text[2:] if text.startswith("-0") and not value else text
