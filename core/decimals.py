"""Decimals as text in positional notation, never an exponent (``0E-8`` -> ``0.00000000``),
exact. Money shown to a person goes through ``core.money``."""

from __future__ import annotations

from decimal import Decimal

# Beyond this many places either side of the point, a value is shown in scientific form:
# anything stored or priced is far inside it, and a hostile "1e-999999999" stays short.
PLAIN_MAX_PLACES = 100


def decimal_plain(value: Decimal) -> str:
    """``value`` positionally with its exact digits within ``PLAIN_MAX_PLACES`` places of the
    point; beyond, ``str(value)``. Raises ``ValueError`` for NaN or an infinity."""
    if not value.is_finite():
        raise ValueError(f"not a finite decimal: {value}")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # "n", "N" or "F" only for NaN and the infinities
    if exponent < -PLAIN_MAX_PLACES or value.adjusted() > PLAIN_MAX_PLACES:
        # "1e-999999999" written out is a gigabyte: past the bound, the short form.
        return str(value)
    text = format(value, "f")
    return "0" + text[2:] if text.startswith("-0") and not value else text
