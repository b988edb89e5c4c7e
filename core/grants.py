"""The only writes of roles and the superuser flag, each recorded as a ``RoleChange``. A lead
may, or the operator at the command line (``by`` None, ``via`` "command")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from core.errors import DomainError
from core.models import RoleChange
from core.roles import LEAD, ROLES, forget_roles, role_require

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from core.roles import AnyUser

SUPERUSER = "superuser"
# Where a change came from: ``core.actors.Via``'s values and the admin.
PAGE, API, COMMAND, ADMIN = "page", "api", "command", "admin"
VIAS = (PAGE, API, COMMAND, ADMIN)


def _role_check(role: str) -> Group:
    if role not in ROLES:
        raise DomainError(f"unknown role {role!r:.40} ({', '.join(ROLES)})", field="role")
    group = Group.objects.filter(name=role).first()
    if group is None:  # the roles migration creates them; a database without it is broken
        raise DomainError(f"the group {role!r} does not exist: run migrate", field="role")
    return group


def _actor_check(by: AnyUser | None, via: str) -> None:
    """A user must be a lead; no user is the operator, allowed only at the command line."""
    if by is None:
        if via != COMMAND:
            raise PermissionDenied("changing a role needs a lead")
        return
    role_require(by, LEAD, action="changing a role")


def _record(*, user: User, role: str, action: str, by: AnyUser | None, via: str) -> RoleChange:
    if via not in VIAS:
        raise ValueError(f"unknown via {via!r}")
    return RoleChange.objects.create(
        user=user,
        role=role,
        action=action,
        by=None if by is None or isinstance(by, AnonymousUser) else by,
        via=via,
    )


@transaction.atomic
def role_grant(*, user: User, role: str, by: AnyUser | None = None, via: str = PAGE) -> bool:
    """Give ``user`` ``role`` and record it; False when they had it (nothing recorded). Raises
    ``DomainError`` (field "role") for an unknown role, ``PermissionDenied`` for a non-lead."""
    _actor_check(by, via)
    group = _role_check(role)
    user_model = get_user_model()
    locked = user_model.objects.select_for_update().get(pk=user.pk)
    if locked.groups.filter(pk=group.pk).exists():
        return False
    locked.groups.add(group)
    forget_roles(user)
    _record(user=locked, role=role, action=RoleChange.Action.GRANTED, by=by, via=via)
    return True


@transaction.atomic
def role_revoke(*, user: User, role: str, by: AnyUser | None = None, via: str = PAGE) -> bool:
    """Take ``role`` from ``user``; False when they lacked it. Rules: ``role_grant``."""
    _actor_check(by, via)
    group = _role_check(role)
    user_model = get_user_model()
    locked = user_model.objects.select_for_update().get(pk=user.pk)
    if not locked.groups.filter(pk=group.pk).exists():
        return False
    locked.groups.remove(group)
    forget_roles(user)
    _record(user=locked, role=role, action=RoleChange.Action.REVOKED, by=by, via=via)
    return True


@transaction.atomic
def superuser_grant(*, user: User, via: str = COMMAND) -> bool:
    """Make ``user`` staff and superuser, recorded; False when already both. Command line only:
    ``PermissionDenied`` for any other ``via``."""
    _actor_check(None, via)
    locked = get_user_model().objects.select_for_update().get(pk=user.pk)
    if locked.is_superuser and locked.is_staff:
        return False
    locked.is_superuser = locked.is_staff = True
    locked.save(update_fields=["is_superuser", "is_staff"])
    user.is_superuser = user.is_staff = True
    _record(user=locked, role=SUPERUSER, action=RoleChange.Action.GRANTED, by=None, via=via)
    return True


@transaction.atomic
def user_create(
    *,
    username: str,
    password: str | None,
    role: str,
    superuser: bool = False,
    by: AnyUser | None = None,
    via: str = COMMAND,
) -> User:
    """Create ``username`` with ``role`` (and, with ``superuser``, staff and superuser), every grant
    recorded; ``password`` None: no usable password. Raises ``DomainError`` on "username"
    (empty, taken), "password" (validators) or "role"; ``PermissionDenied`` as ``role_grant``."""
    _actor_check(by, via)
    if superuser and by is not None:
        raise PermissionDenied("a superuser is made at the command line only")
    _role_check(role)
    user_model = get_user_model()
    username = (username or "").strip()
    if not username:
        raise DomainError("required", field="username")
    if user_model.objects.filter(username=username).exists():
        raise DomainError(f"a user named {username!r} exists", field="username", code="conflict")
    user = user_model(username=username, is_staff=superuser, is_superuser=superuser)
    if password is None:
        user.set_unusable_password()
    else:
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise DomainError(" ".join(exc.messages), field="password") from exc
        user.set_password(password)
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError as exc:  # a concurrent create of the same name
        raise DomainError(
            f"a user named {username!r} exists", field="username", code="conflict"
        ) from exc
    if superuser:
        _record(user=user, role=SUPERUSER, action=RoleChange.Action.GRANTED, by=by, via=via)
    role_grant(user=user, role=role, by=by, via=via)
    return user
