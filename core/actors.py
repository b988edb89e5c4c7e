"""Who did a change, as one wording for every log line, page and API answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    # A user, an anonymous user (counted as none) or None.
    Actor = AbstractBaseUser | AnonymousUser | None


class Via(models.TextChoices):
    """Where a change came from (stored beside the user who made it, when there was one)."""

    PAGE = "page", "a page"
    API = "api", "the API"
    COMMAND = "command", "the command line"
    SYSTEM = "system", "the system"


def via_of(by: Actor, via: str | None) -> str:
    """``via`` when given; else "page" for a user's change, "system" for none."""
    if via:
        return Via(via).value
    return Via.PAGE.value if _username(by) else Via.SYSTEM.value


def actor_text(*, by: Actor = None, via: str | None = None) -> str:
    """After a verb: "by carol", "by carol through the API", "from the command line", "by
    the system". ``by``: a user or None (anonymous counts as none). Raises ``ValueError``
    for an unknown ``via``."""
    name = _username(by)
    kind = via_of(by, via)
    if name:
        return f"by {name} through the API" if kind == Via.API else f"by {name}"
    if kind == Via.COMMAND:
        return "from the command line"
    if kind == Via.API:
        return "through the API"
    if kind == Via.PAGE:
        return "from a page"  # by a user since removed
    return "by the system"


def _username(by: Actor) -> str | None:
    if by is None or not getattr(by, "is_authenticated", False):
        return None
    return by.get_username() or None
