"""Dashboard filters: rates, money and roles, as plain text (autoescaping applies)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from django import template

from core.money import per_usd_text, usd_signed_text, usd_text
from core.roles import ENGINEER, LEAD, ROLES, user_has_role

register = template.Library()


@register.filter
def percent(rate: float | None) -> str:
    """A rate in [0, 1] as "66.7%"; None or non-finite -> "undefined"."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        return "undefined"
    return f"{rate * 100:.1f}%"


@register.simple_tag
def percent_interval(low: float | None, high: float | None) -> str:
    """Rates as "[4.3%, 48.1%]"; up to four decimals when one would print equal bounds of a
    non-zero-width interval; "undefined" when a bound is None."""
    if low is None or high is None:
        return "undefined"
    for decimals in range(1, 5):
        a, b = f"{low * 100:.{decimals}f}", f"{high * 100:.{decimals}f}"
        if a != b or not high > low:
            break
    return f"[{a}%, {b}%]"


@register.simple_tag
def number_interval(low: float | None, high: float | None) -> str:
    """Numbers as "[0.129, 1.371]"; up to eight decimals, as ``percent_interval``."""
    if low is None or high is None:
        return "undefined"
    for decimals in range(3, 9):
        a, b = f"{low:.{decimals}f}", f"{high:.{decimals}f}"
        if a != b or not high > low:
            break
    return f"[{a}, {b}]"


@register.filter
def usd(amount: Decimal | float | None) -> str:
    """``core.money.usd_text``; None, "" or a non-amount -> "unknown"."""
    try:
        return usd_text(None if amount == "" else amount)
    except ValueError:
        return "unknown"


@register.filter
def usd_signed(amount: Decimal | float | None) -> str:
    """A signed difference of dollars ("+$0.0000051", "−$0.0040"); None -> "unknown"."""
    try:
        return usd_signed_text(None if amount == "" else amount)
    except ValueError:
        return "unknown"


@register.filter
def per_usd(value: float | None) -> str:
    """A pass rate per dollar, three significant digits ("412 per $"); None -> "unknown"."""
    return per_usd_text(value)


@register.simple_tag
def per_usd_interval(low: float | None, high: float | None) -> str:
    """The 95% interval of a pass rate per dollar ("[380, 440] per $"); "" when unknown."""
    if low is None or high is None:
        return ""
    return f"[{per_usd_text(low).removesuffix(' per $')}, {per_usd_text(high)}]"


@register.filter
def run_cost(stats: Any) -> str:
    """From ``RunListStats``: "$x", "≥ $x (cost unknown for n of m)", "unknown", or "—" before
    any trial finished."""
    state = stats.cost_state
    if state == "none":
        return "—"
    if state == "unknown":
        return "unknown"
    total = usd(stats.cost_known_usd or Decimal(0))
    if state == "partial":
        return f"≥ {total} (cost unknown for {stats.cost_unknown} of {stats.finished})"
    return total


@register.filter
def pretty_json(value: Any) -> str:
    """JSON indented by 2 for display (non-ASCII kept); the caller's autoescaping applies."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def can_start_runs(user: Any) -> bool:
    """Engineers and leads may start and cancel runs."""
    return user_has_role(user, ENGINEER, LEAD)


@register.filter
def role_names(user: Any) -> list[str]:
    """The user's roles (reviewer, engineer, lead) in that order; superusers have all."""
    return [r for r in ROLES if user_has_role(user, r)]


@register.filter
def is_lead(user: Any) -> bool:
    """Leads approve judges and manage API tokens."""
    return user_has_role(user, LEAD)


KEY_KS = frozenset({1, 2, 3, 5})


@register.filter
def key_ks(rows: list[Any]) -> list[Any]:
    """Rows of a pass@k table to show: all up to 10; beyond, k = 1, 2, 3, 5, multiples of 10 and
    the largest."""
    rows = list(rows or [])
    if len(rows) <= 10:
        return rows

    def k_of(row: Any) -> int:
        k: int = row["k"] if isinstance(row, dict) else row.k
        return k

    top = max(k_of(r) for r in rows)
    return [r for r in rows if k_of(r) in KEY_KS or k_of(r) % 10 == 0 or k_of(r) == top]
