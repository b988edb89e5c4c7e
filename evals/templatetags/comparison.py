"""Formatting for the comparison pages. Every filter returns plain text, so autoescaping
still applies to whatever it is given."""

from __future__ import annotations

from decimal import Decimal

from django import template

from evals.comparison.pvalue import pvalue_format

register = template.Library()


@register.filter
def points(delta: float | None) -> str:
    """A difference of rates (fractions) in percentage points, signed, one decimal
    ("+12.5 pts", "−3.0 pts", "0.0 pts"); None -> "undefined"."""
    if delta is None:
        return "undefined"
    value = round(delta * 100, 1)
    if value == 0:
        return "0.0 pts"
    return f"{'+' if value > 0 else '−'}{abs(value):.1f} pts"


def points_bounds(low: float | None, high: float | None) -> str | None:
    """The bounds of an interval of differences of rates in signed percentage points,
    "−12.5, +3.0": one decimal, more (up to four) when one would print two equal bounds of an
    interval that is not of zero width; None when a bound is None."""
    if low is None or high is None:
        return None

    def text(value: float, decimals: int) -> str:
        shown = f"{abs(value) * 100:.{decimals}f}"
        if float(shown) == 0:
            return shown
        return f"{'+' if value > 0 else '−'}{shown}"

    for decimals in range(1, 5):
        a, b = text(low, decimals), text(high, decimals)
        if a != b or not high > low:
            break
    return f"{a}, {b}"


@register.simple_tag
def points_interval(low: float | None, high: float | None) -> str:
    """An interval of rate differences, "[−12.5, +3.0] pts"; "undefined" when a bound is None."""
    bounds = points_bounds(low, high)
    return "undefined" if bounds is None else f"[{bounds}] pts"


@register.filter
def signed(value: float | Decimal | None, decimals: int = 1) -> str:
    """A signed number with ``decimals`` decimals ("+12.3", "−0.0040"); None -> "unknown"."""
    if value is None:
        return "unknown"
    text = f"{abs(float(value)):.{int(decimals)}f}"
    if float(text) == 0:
        return text
    return f"{'+' if value > 0 else '−'}{text}"


@register.filter
def ratio(passed: int, graded: int) -> str:
    """ "x/N" counts; "—" when nothing was graded."""
    return f"{passed}/{graded}" if graded else "—"


@register.filter
def get_item(mapping: dict, key: str):
    """``mapping[key]``, or None when absent (for per-row lookups in a template)."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def pvalue_text(p: float | None) -> str:
    """A p-value as ``pvalue_format`` writes it ("0.002", "< 0.001"); "—" when None."""
    return "—" if p is None else pvalue_format(p)


@register.filter
def case_outlook(verdict) -> str:
    """A suspect's outlook as plain text (``evals.comparison.render.case_outlook``)."""
    from evals.comparison.render import case_outlook as outlook  # noqa: PLC0415

    return outlook(verdict)
