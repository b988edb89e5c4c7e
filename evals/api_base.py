"""What every API endpoint shares: cursor pagination, the strict JSON renderer and the
role permissions (the same roles as the UI, evals.roles)."""

from __future__ import annotations

import json

from django.http import HttpResponse
from rest_framework import permissions, serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.pagination import CursorPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

from . import exports
from .roles import ENGINEER, LEAD, REVIEWER, user_has_role
from .strict_json import json_safe


class IdCursorPagination(CursorPagination):
    """Cursor pages in creation order, by ``id`` alone: unique and increasing, so the cursor
    is a plain position (``id > last``) and a page never repeats or skips a row, however many
    rows share one ``created_at`` (an ingest stamps thousands with one time; DRF's cursor over
    a non-unique first field falls back to offsets and loops past 1,000 ties).
    ``?page_size=`` default 50, maximum 100 (a larger request is capped, fault L1); a
    page size that is not a positive integer is a 400 naming ``page_size``."""

    page_size = 50
    max_page_size = 100
    page_size_query_param = "page_size"
    ordering = ("id",)
    cursor_query_description = "Opaque cursor from a page's `next` or `previous` link."
    page_size_query_description = (
        "Rows per page: a positive integer, default 50, at most 100 (larger is capped)."
    )

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
            raise serializers.ValidationError(
                {self.page_size_query_param: [f"expected a positive integer, got {raw[:100]!r}"]}
            )
        return min(int(raw), self.max_page_size)

    def get_paginated_response_schema(self, schema: dict) -> dict:
        """DRF's page envelope (next, previous, results), each field described."""
        out = super().get_paginated_response_schema(schema)
        fields = out["properties"]
        fields["next"]["description"] = "URL of the next page (null: this is the last page)."
        fields["previous"]["description"] = "URL of the previous page (null: the first page)."
        fields["results"]["description"] = "This page's rows, in creation order."
        return out


class StrictJSONRenderer(JSONRenderer):
    """JSON with non-finite numbers as null (``json_safe``), dumped with allow_nan=False
    (fault C1): a response never holds NaN or Infinity."""

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None:
            return b""
        return json.dumps(
            json_safe(data),
            cls=JSONEncoder,
            allow_nan=False,
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")


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


# --- downloads ----------------------------------------------------------------------------


class DownloadNegotiation(BaseContentNegotiation):
    """Downloads choose their body by ``?format=``, not by the Accept header; DRF's own use
    of ``?format=`` (a renderer name) is switched off. Errors still render as JSON."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def download_format(request, allowed: tuple[str, ...]) -> str:
    """``?format=`` (default csv) when it is one of ``allowed``; else a 400 naming ``format``."""
    fmt = request.query_params.get("format", "csv")
    if fmt not in allowed:
        raise serializers.ValidationError(
            {"format": [f"expected one of {', '.join(allowed)}, got {fmt[:100]!r}"]}
        )
    return fmt


def download_zone(request):
    """The ``?tz=`` zone (``evals.exports.zone_get``, default UTC); a 400 naming ``tz``."""
    try:
        return exports.zone_get(name=request.query_params.get("tz"))
    except exports.ExportError as exc:
        raise serializers.ValidationError({"tz": [str(exc)]}) from exc


def attachment(body: bytes, content_type: str, filename: str) -> HttpResponse:
    """``body`` as a download named ``filename``."""
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def table_download(request, build, stem: str) -> HttpResponse:
    """The table ``build(zone)`` (an ``evals.exports.ExportTable``) as ``<stem>.csv`` or
    ``<stem>.parquet`` by ``?format=``, times in ``?tz=``; 400s name the option."""
    fmt = download_format(request, exports.FORMATS)
    body = exports.table_write(table=build(download_zone(request)), fmt=fmt)
    return attachment(body, exports.CONTENT_TYPES[fmt], f"{stem}.{fmt}")
