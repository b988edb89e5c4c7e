"""Errors as the API answers them: DRF's handler plus three mappings.

1. ``DomainError`` -> ``{"detail", "field", "record", ...}``, status by its ``code``
   (``core.errors``);
2. Django's ``RequestDataTooBig`` -> 413 ``{"detail", "limit"}``;
3. a ``RecursionError`` inside a DRF parser -> the 400 ``StrictJSONParser`` gives; from
   anywhere else it stays a 500."""

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
    "length_required": 411,
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
    """``{"detail": str(error), "field", "record", **extra}``, status by its code."""
    body: dict[str, Any] = {
        "detail": str(error),
        "field": error.field or None,
        "record": error.record,
    }
    body.update(error.extra)
    return Response(body, status=STATUS[error.code])


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler plus the module's mappings; None (a 500) for anything else."""
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
