"""A JSON API body whose ``Content-Length`` is over its view's ``body_limit`` row
(``core.bounds.BODY_MAX_BYTES``) is a 413 before the view runs: DRF reads a body whole
before its parser could check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from core.bounds import body_limit_bytes, body_too_large_text
from core.http import content_length

_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _view_class(view_func: Callable[..., Any]) -> type | None:
    """The class behind a view function (``view_class``, or a viewset's ``cls``), or None."""
    return getattr(view_func, "view_class", None) or getattr(view_func, "cls", None)


class BodyLimitMiddleware:
    """Refuses a JSON API body over its view's limit with a 413, unread."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> JsonResponse | None:
        if request.method not in _METHODS or not request.path_info.startswith("/api/"):
            return None
        media = (request.content_type or "").lower()
        if media != "application/json" and not media.endswith("+json"):
            return None
        size = content_length(request)
        if size is None:
            return None  # no length: the parser caps its read (core.api.parsers)
        view = _view_class(view_func)
        limit = body_limit_bytes(getattr(view, "body_limit", None))
        if size <= limit:
            return None
        detail = body_too_large_text(size, limit, hint=getattr(view, "body_limit_hint", ""))
        body = {"detail": detail, "field": None, "record": None, "limit": limit}
        return JsonResponse(body, status=413)
