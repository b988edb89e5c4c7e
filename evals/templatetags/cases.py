"""Template filters of the case editor."""

from __future__ import annotations

from typing import Any

from django import template

from evals.case_changes import user_may_edit_cases

register = template.Library()


@register.filter
def can_edit_cases(user: Any) -> bool:
    """Engineers and leads may add, edit and retire cases (``evals.case_changes``)."""
    return user_may_edit_cases(user)
