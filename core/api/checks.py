"""Checks every API view runs before it reads anything, as throttle classes, because DRF runs
throttles after authentication and permissions (401 and 403 come first):

- query parameters holding U+0000 or a lone surrogate are a 400 (PostgreSQL refuses NUL even as
  a query parameter; ``core.text``);
- a body sent without ``Content-Length`` (``Transfer-Encoding: chunked``) is a 411: Django reads
  a WSGI body only up to its declared length, so the view would see an empty body and answer
  about missing fields instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.throttling import BaseThrottle

from core.errors import DomainError
from core.http import content_length
from core.text import unstorable_refuse_params

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class UnstorableQueryCheck(BaseThrottle):
    """``allow_request`` raises ``DomainError`` naming the first such parameter; else True."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        unstorable_refuse_params(request.query_params)
        return True


class DeclaredBodyLengthCheck(BaseThrottle):
    """``allow_request`` raises ``DomainError`` (``length_required``, 411) for a request that
    says it has a body (``Transfer-Encoding``) but no ``Content-Length``; else True."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        raw = request._request
        chunked = bool(raw.META.get("HTTP_TRANSFER_ENCODING"))
        if chunked and content_length(raw) is None:
            raise DomainError(
                code="length_required",
                detail=(
                    "Content-Length is required: a body sent in chunks (Transfer-Encoding) "
                    "is not read; send it with its length"
                ),
            )
        return True
