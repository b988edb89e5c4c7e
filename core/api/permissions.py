"""API permissions: the dashboard's roles (``core.roles``) as DRF permission classes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import permissions

from core.roles import ENGINEER, LEAD, REVIEWER, user_has_role

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


def _role_permission(name: str, *roles: str) -> type[permissions.BasePermission]:
    class RolePermission(permissions.BasePermission):
        message = f"requires one of the roles: {', '.join(roles)}"

        def has_permission(self, request: Request, view: APIView) -> bool:
            return user_has_role(request.user, *roles)

    RolePermission.__name__ = RolePermission.__qualname__ = name
    return RolePermission


IsViewer = _role_permission("IsViewer", REVIEWER, ENGINEER, LEAD)


IsRunner = _role_permission("IsRunner", ENGINEER, LEAD)


IsLabeler = _role_permission("IsLabeler", REVIEWER, LEAD)


IsLead = _role_permission("IsLead", LEAD)
