"""The one cursor pagination every list endpoint uses (by id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination

if TYPE_CHECKING:
    from rest_framework.request import Request


class IdCursorPagination(CursorPagination):
    """Cursor pages by ``id`` alone, unique and increasing, so a page never repeats or skips a
    row however many share ``created_at`` (DRF's cursor over a non-unique field falls back to
    offsets). ``?page_size=`` 50, at most 100 (capped); a bad ``page_size`` or ``cursor`` is a
    400 naming it."""

    page_size = 50
    max_page_size = 100
    page_size_query_param = "page_size"
    ordering = ("id",)
    cursor_query_description = "Opaque cursor from a page's `next` or `previous` link."
    page_size_query_description = (
        "Rows per page: a positive integer, default 50, at most 100 (larger is capped)."
    )

    def get_page_size(self, request: Request) -> int:
        raw: str | None = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        digits = raw.lstrip("0")
        if not raw.isascii() or not raw.isdigit() or not digits:
            raise serializers.ValidationError(
                {self.page_size_query_param: [f"expected a positive integer, got {raw[:100]!r}"]}
            )
        # Larger is capped; never int() of thousands of digits (Python's advice would show).
        return min(int(digits) if len(digits) <= 4 else self.max_page_size, self.max_page_size)

    def decode_cursor(self, request: Request) -> Cursor | None:
        """The ``?cursor=`` position; a foreign cursor is a 400 naming ``cursor`` (DRF: 404)."""
        try:
            return super().decode_cursor(request)
        except NotFound:
            raw = request.query_params.get(self.cursor_query_param, "")
            raise serializers.ValidationError(
                {self.cursor_query_param: [f"not a cursor from this list, got {raw[:100]!r}"]}
            ) from None

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """DRF's page envelope (next, previous, results), each field described."""
        out = super().get_paginated_response_schema(schema)
        fields = out["properties"]
        fields["next"]["description"] = "URL of the next page (null: this is the last page)."
        fields["previous"]["description"] = "URL of the previous page (null: the first page)."
        fields["results"]["description"] = "This page's rows, in creation order."
        return out
