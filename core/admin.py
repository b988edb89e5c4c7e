"""The admin's users and groups (roles and flags read-only; grant and revoke actions call
``core.grants``), and the view-only base of rows of record."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from core.errors import DomainError
from core.grants import ADMIN, role_grant, role_revoke
from core.models import RoleChange
from core.roles import ROLES

if TYPE_CHECKING:
    # django-stubs makes the admin classes generic in their model; Django's own classes
    # cannot be subscripted at run time.
    _ModelAdmin = admin.ModelAdmin[Any]
    _TabularInline = admin.TabularInline[Any, Any]
    _UserAdmin = UserAdmin[User]
else:
    _ModelAdmin, _TabularInline, _UserAdmin = admin.ModelAdmin, admin.TabularInline, UserAdmin

# An admin action: the model admin, the request, the selected users.
_UserAction = Callable[[Any, HttpRequest, QuerySet[User]], None]


class ViewOnly:
    """No add, change or delete in the admin, for every user, superusers included."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class RecordAdmin(ViewOnly, _ModelAdmin):
    """View only: grants and verdicts of record change only through their services."""


class RecordInline(ViewOnly, _TabularInline):
    """A view-only inline (see ``RecordAdmin``)."""

    extra = 0
    can_delete = False


class RoleChangeInline(RecordInline):
    model = RoleChange
    fk_name = "user"
    fields = ("at", "role", "action", "by", "via")
    readonly_fields = fields
    ordering = ("-at", "-id")


def _role_action(service: Callable[..., bool], role: str, verb: str, done: str) -> _UserAction:
    def action(modeladmin: _UserAdmin, request: HttpRequest, queryset: QuerySet[User]) -> None:
        changed = 0
        for user in queryset:
            try:
                changed += service(user=user, role=role, by=request.user, via=ADMIN)
            except (PermissionDenied, DomainError) as exc:
                modeladmin.message_user(request, str(exc), messages.ERROR)
                return
        modeladmin.message_user(request, f"{role} {done} for {changed} user(s)")

    action.__name__ = f"{service.__name__}_{role}"
    return admin.action(description=f"{verb} role {role}")(action)


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AssayUserAdmin(_UserAdmin):
    """Django's user admin with roles and flags read-only and grant/revoke actions."""

    readonly_fields = (
        "is_staff",
        "is_superuser",
        "groups",
        "user_permissions",
        "last_login",
        "date_joined",
    )
    inlines = [RoleChangeInline]
    actions = [
        *(_role_action(role_grant, role, "Grant", "granted") for role in ROLES),
        *(_role_action(role_revoke, role, "Revoke", "revoked") for role in ROLES),
    ]


@admin.register(Group)
class RoleGroupAdmin(ViewOnly, GroupAdmin):
    """The three role groups, view only (made by a migration; membership via ``core.grants``)."""


@admin.register(RoleChange)
class RoleChangeAdmin(RecordAdmin):
    """The history of role grants and revocations (``core.grants``)."""

    list_display = ("at", "user", "role", "action", "by", "via")
    list_filter = ("role", "action", "via")
    list_select_related = ("user", "by")
    search_fields = ("user__username", "by__username")
