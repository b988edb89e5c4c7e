"""The three roles, as Django groups created by a migration, and the checks services use."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    # Whoever a request or a caller acts as (``request.user``).
    AnyUser = User | AnonymousUser

REVIEWER = "reviewer"
ENGINEER = "engineer"
LEAD = "lead"
ROLES = (REVIEWER, ENGINEER, LEAD)

_CACHE = "_assay_role_names"


def user_roles(user: AnyUser) -> frozenset[str]:
    """``user``'s group names, read once per user object (one query) and cached on it;
    ``forget_roles`` clears it."""
    cached: frozenset[str] | None = getattr(user, _CACHE, None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True))
        setattr(user, _CACHE, cached)
    return cached


def roles_remember(user: User, names: Iterable[str]) -> None:
    """Cache ``names`` as ``user``'s roles (read with the user: ``user_with_roles_get``)."""
    setattr(user, _CACHE, frozenset(names))


def user_with_roles_get(
    queryset: QuerySet[Any], *, path: str = "", extra: tuple[str, ...] = ()
) -> tuple[User, tuple[Any, ...]] | None:
    """``(user, extra values)`` from ``queryset`` with the user's roles remembered, in one query;
    None when no row. ``path``: the lookup from the queryset's model to the user ("",
    ``"user__"``)."""
    user_model = get_user_model()
    columns = [f.attname for f in user_model._meta.concrete_fields]
    rows = list(
        queryset.values_list(*extra, *(f"{path}{c}" for c in columns), f"{path}groups__name")
    )
    if not rows:
        return None
    first = rows[0]
    user = user_model.from_db(queryset.db, columns, first[len(extra) : -1])
    roles_remember(user, [row[-1] for row in rows if row[-1] is not None])
    return user, first[: len(extra)]


def forget_roles(user: object) -> None:
    """Drop the cached role names of ``user`` (after its groups changed)."""
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)


def user_has_role(user: AnyUser, *roles: str) -> bool:
    """True when ``user`` is in any of ``roles`` (superusers have every role)."""
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return not user_roles(user).isdisjoint(roles)


def role_require(user: AnyUser, *roles: str, action: str) -> None:
    """Raise ``PermissionDenied`` ("<action> needs the role lead") unless ``user`` has one of
    ``roles``."""
    if not user_has_role(user, *roles):
        raise PermissionDenied(f"{action} needs the role {' or '.join(roles)}")
