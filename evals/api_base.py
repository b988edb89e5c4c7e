"""What every API endpoint shares: cursor pagination, the strict JSON renderer and the
role permissions (the same roles as the UI, evals.roles)."""

from __future__ import annotations

import json

from rest_framework import permissions
from rest_framework.pagination import CursorPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

from .roles import ENGINEER, LEAD, REVIEWER, user_has_role
from .strict_json import json_safe


class CreatedCursorPagination(CursorPagination):
    """Cursor pages in the stable order (created_at, id): ``?page_size=`` default 50,
    maximum 100 (a larger request is capped to 100, fault L1); ``next`` walks every page."""

    page_size = 50
    max_page_size = 100
    page_size_query_param = "page_size"
    ordering = ("created_at", "id")

    def get_page_size(self, request) -> int:
        try:
            size = int(request.query_params.get(self.page_size_query_param, self.page_size))
        except (TypeError, ValueError):
            return self.page_size
        return min(max(size, 1), self.max_page_size)


class SetAtCursorPagination(CreatedCursorPagination):
    """Cursor pages of baselines, ordered by (set_at, id)."""

    ordering = ("set_at", "id")


class StrictJSONRenderer(JSONRenderer):
    """JSON with non-finite numbers as null (``json_safe``), dumped with allow_nan=False
    (fault C1): a response never holds NaN or Infinity."""

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None:
            return b""
        return json.dumps(json_safe(data), cls=JSONEncoder, allow_nan=False,
                          ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _role_permission(name: str, *roles: str) -> type[permissions.BasePermission]:
    class RolePermission(permissions.BasePermission):
        message = f"requires one of the roles: {', '.join(roles)}"

        def has_permission(self, request, view) -> bool:
            return user_has_role(request.user, *roles)

    RolePermission.__name__ = RolePermission.__qualname__ = name
    return RolePermission


IsViewer = _role_permission("IsViewer", REVIEWER, ENGINEER, LEAD)
IsRunner = _role_permission("IsRunner", ENGINEER, LEAD)
IsLabeler = _role_permission("IsLabeler", REVIEWER, LEAD)
