"""The three roles, as Django groups created by a migration, and the checks services use."""

from django.core.exceptions import PermissionDenied

REVIEWER = "reviewer"
ENGINEER = "engineer"
LEAD = "lead"
ROLES = (REVIEWER, ENGINEER, LEAD)

_CACHE = "_assay_role_names"


def user_roles(user) -> frozenset[str]:
    """The names of ``user``'s groups, read once per user object (one query) and cached on
    it: ``request.user`` is loaded afresh for every request, so a request checks roles
    against the database once however many views, services and templates ask. Changing
    the user's groups through ``user.groups`` clears the cache (``forget_roles``)."""
    cached = getattr(user, _CACHE, None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True))
        setattr(user, _CACHE, cached)
    return cached


def roles_remember(user, names) -> None:
    """Keep ``names`` (the names of ``user``'s groups, read with the user in one query, e.g.
    by the API's token look-up) as ``user``'s role names: ``user_roles`` then reads nothing."""
    setattr(user, _CACHE, frozenset(names))


def forget_roles(user) -> None:
    """Drop the cached role names of ``user`` (after its groups changed)."""
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)


def user_has_role(user, *roles: str) -> bool:
    """True when ``user`` is in any of ``roles`` (superusers have every role)."""
    if not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return not user_roles(user).isdisjoint(roles)


def role_require(user, *roles: str, action: str) -> None:
    """Raise ``PermissionDenied`` ("<action> needs the role lead") unless ``user`` has one of
    ``roles``: the check every service that changes state makes, whoever calls it."""
    if not user_has_role(user, *roles):
        raise PermissionDenied(f"{action} needs the role {' or '.join(roles)}")
