"""Formatting for the labeling and calibration pages. Every filter returns plain text, so
Django's autoescaping still applies to whatever it is given."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template

from core.roles import LEAD, REVIEWER, user_has_role

register = template.Library()


@register.filter
def display_text(value: Any) -> str:
    """A JSON value as display text: strings as they are, anything else pretty JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def ratio(value: float | None, digits: int = 3) -> str:
    """A statistic in fixed notation ("0.612"); None or a non-finite value -> "undefined"."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "undefined"
    return f"{value:.{int(digits)}f}"


@register.filter
def can_label(user: Any) -> bool:
    """Reviewers and leads label (``LABELER_ROLES``): only they are shown the queue's links."""
    return user_has_role(user, REVIEWER, LEAD)


@register.filter
def is_lead(user: Any) -> bool:
    """Leads approve, revoke and adjudicate."""
    return user_has_role(user, LEAD)
