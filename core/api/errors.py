"""Errors as the API answers them: DRF's handler plus three mappings.

1. ``DomainError`` (``core.errors``) -> 400 ``{"detail", "field", "record", ...}`` with the
   field it names (409 for code "conflict", 413 "too_large", 404
   "not_found", 412 "precondition_failed", 428 "precondition_required"): the one place a
   domain refusal becomes an HTTP answer;
2. a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (Django's ``RequestDataTooBig``) is a
   413 ``{"detail": "...", "limit": <bytes>}``;
3. a ``RecursionError`` raised inside any DRF parser (views that name DRF's own
   ``JSONParser``) is the same 400 as ``StrictJSONParser`` gives. A ``RecursionError`` from
   anywhere else stays a 500: it is a bug, not bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.api.parsers import NESTED
from core.errors import DomainError

STATUS = {
    "invalid": 400,
    "conflict": 409,
    "too_large": 413,
    "not_found": 404,
    "precondition_failed": 412,
    "precondition_required": 428,
}
_DRF_PARSERS = str(Path(JSONParser.__module__.replace(".", "/")).with_suffix(".py"))


def _raised_in_a_parser(exc: BaseException) -> bool:
    """True when ``exc``'s traceback passes through DRF's parsers module."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(_DRF_PARSERS):
            return True
        tb = tb.tb_next
    return False


def domain_error_response(error: DomainError) -> Response:
    """``error`` as the API answers it: ``{"detail": str(error), "field": <field or null>,
    "record": <record or null>, **extra}``; status by its code."""
    body: dict[str, Any] = {
        "detail": str(error),
        "field": error.field or None,
        "record": error.record,
    }
    body.update(error.extra)
    return Response(body, status=STATUS[error.code])


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's ``exception_handler`` plus the mappings of the module doc; None (= a 500) for
    anything else DRF does not handle."""
    if isinstance(exc, DomainError):
        return domain_error_response(exc)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {
                "detail": f"The request body is larger than the limit of {limit} "
                f"bytes (DATA_UPLOAD_MAX_MEMORY_SIZE).",
                "limit": limit,
            },
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, RecursionError) and _raised_in_a_parser(exc):
        exc = ParseError(NESTED)
    return drf_exception_handler(exc, context)
