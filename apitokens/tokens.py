"""API tokens: creating, revoking, and the user a bearer token acts as."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.core.exceptions import PermissionDenied
from django.utils import timezone

from apitokens.models import ApiToken
from core.roles import LEAD, REVIEWER, user_has_role, user_with_roles_get


def token_hash(token: str) -> str:
    """SHA-256 hex digest (64 chars) of ``token``'s UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_user_problem(*, user, by) -> str | None:
    """Why lead ``by`` may not create a token acting as ``user``, or None: a lead may for
    themselves or an engineer-only (CI) account, never for a superuser, another lead or a
    reviewer (a reviewer's labels are the blind evidence calibration rests on).
    """
    if user.pk == by.pk:
        return None
    if user.is_superuser:
        return "a token acting as a superuser is made with manage.py token_create only"
    if user_has_role(user, LEAD, REVIEWER):
        return (
            "a token acts as its user: only they may hold one acting as a lead or a reviewer "
            "(create it while logged in as them, or use an engineer account for CI)"
        )
    return None


def token_create(*, user, name: str, by=None) -> tuple[ApiToken, str]:
    """A new token for ``user``: (row, token). The token (``secrets.token_urlsafe(40)``) is
    returned once; only its hash is stored. ``by``: a lead (the page), None for
    ``manage.py token_create``. Raises PermissionDenied; ValueError naming ``name`` (empty or
    over 200 characters).
    """
    if by is not None and not user_has_role(by, LEAD):
        raise PermissionDenied("only a lead creates API tokens")
    if by is not None and (problem := token_user_problem(user=user, by=by)):
        raise PermissionDenied(problem)
    name = name.strip()
    if not name or len(name) > 200:
        raise ValueError("name: must be 1 to 200 characters")
    token = secrets.token_urlsafe(40)
    row = ApiToken.objects.create(user=user, name=name, key_hash=token_hash(token), created_by=by)
    return row, token


def token_revoke(*, token: ApiToken, by=None) -> bool:
    """Revoke ``token`` (compare-and-set: revoking twice is a no-op); True when this call
    revoked it. ``by`` (when given) must be a lead. Raises PermissionDenied."""
    if by is not None and not user_has_role(by, LEAD):
        raise PermissionDenied("only a lead revokes API tokens")
    return bool(
        ApiToken.objects.filter(id=token.id, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )


# ``last_used_at`` is written at most once a minute per token: a client paging the API
# makes many requests a second, and a write per request would cost each call a write lock.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def token_user(*, token: str):
    """The active user of a live ``token`` with its roles read, in one query
    (``core.roles.user_with_roles_get``); None when unknown, revoked or inactive. Writes
    ``last_used_at`` when unset or ``LAST_USED_RESOLUTION`` old.
    """
    found = user_with_roles_get(
        ApiToken.objects.filter(key_hash=token_hash(token), revoked_at__isnull=True),
        path="user__",
        extra=("id", "last_used_at"),
    )
    if found is None:
        return None
    user, (token_id, last_used_at) = found
    if not user.is_active:
        return None
    now = timezone.now()
    if last_used_at is None or now - last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(id=token_id).update(last_used_at=now)
    return user
