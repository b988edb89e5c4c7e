"""Downloads over the API: the format chosen by ``?format=``, and the attachment response."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.http import HttpResponse
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation

if TYPE_CHECKING:
    from rest_framework.parsers import BaseParser
    from rest_framework.renderers import BaseRenderer
    from rest_framework.request import Request


class DownloadNegotiation(BaseContentNegotiation):
    """The body is chosen by ``?format=``, not Accept (DRF's renderer ``?format=`` is off);
    errors still render as JSON."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = list(renderers)[0]
        return first, first.media_type


def download_format(request: Request, allowed: tuple[str, ...]) -> str:
    """``?format=`` (default csv) when it is one of ``allowed``; else a 400 naming ``format``."""
    fmt: str = request.query_params.get("format", "csv")
    if fmt not in allowed:
        raise serializers.ValidationError(
            {"format": [f"expected one of {', '.join(allowed)}, got {fmt[:100]!r}"]}
        )
    return fmt


def attachment(body: bytes, content_type: str, filename: str) -> HttpResponse:
    """``body`` as a download named ``filename``."""
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
