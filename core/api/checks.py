"""Query parameters holding U+0000 or a lone surrogate are a 400 on every API view
(PostgreSQL refuses NUL even as a query parameter; ``core.text``). A throttle class,
because DRF runs throttles after authentication and permissions: 401 and 403 come first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.throttling import BaseThrottle

from core.text import unstorable_refuse_params

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class UnstorableQueryCheck(BaseThrottle):
    """``allow_request`` raises ``DomainError`` naming the first such parameter; else True."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        unstorable_refuse_params(request.query_params)
        return True
