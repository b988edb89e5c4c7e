"""A p-value as text for people: the comparison's headline, the gate's decision, the pages
and the API's ``p_text`` all write it here, so none of them shows "0" or "0.000"."""

from __future__ import annotations

import math


def pvalue_format(p: float, alpha: float = 0.05) -> str:
    """A p-value for people, never "0": below 0.001 "< 0.001", below 0.1 three decimals, else two,
    with more when rounding would carry p across ``alpha`` (0.0496 at 0.05 stays "0.0496").
    Raises ValueError outside [0, 1]."""
    if not (isinstance(p, int | float) and math.isfinite(p) and 0 <= p <= 1):
        raise ValueError(f"p-value must be in [0, 1], got {p!r}")
    if p < 0.001:
        return "< 0.001"
    digits = 3 if p < 0.1 else 2
    text = f"{p:.{digits}f}"
    while (p < alpha) != (float(text) < alpha) and digits < 8:
        digits += 1
        text = f"{p:.{digits}f}"
    return text


def pvalue_phrase(p_text: str) -> str:
    """``"p = 0.002"``, or ``"p < 0.001"`` for a floored value (never "p = < 0.001")."""
    return f"p {p_text}" if p_text.startswith("<") else f"p = {p_text}"
