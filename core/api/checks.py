"""Checks every API view makes once the caller is known: query parameters holding text the
database cannot store (U+0000, a lone surrogate) are a 400 naming the parameter.

Why a throttle class: DRF runs throttles in ``APIView.initial`` right after authentication
and permissions, on every view, so an outsider still gets 403 and an anonymous caller 401
(not a 400 that tells them about the parameter); it never throttles anything. Why at all:
PostgreSQL refuses NUL even in a query's parameters (``?judge=j%00`` was a 500 there and
a 200 on SQLite), so a filter must never see one (``core.text``, the refuse policy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.throttling import BaseThrottle

from core.text import unstorable_refuse_params

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class UnstorableQueryCheck(BaseThrottle):
    """``allow_request`` raises ``DomainError`` (a 400 through ``core.api.errors``) naming
    the first query parameter whose name or value holds U+0000 or a lone surrogate; else
    True. Registered in ``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]``."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        unstorable_refuse_params(request.query_params)
        return True
