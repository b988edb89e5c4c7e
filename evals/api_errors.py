"""Hostile request bodies answer 4xx JSON, never a 500 or Django's HTML error page.

- ``StrictJSONParser`` (REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]): DRF's JSON parser, but
  a body nested more than ``JSON_MAX_DEPTH`` (64) arrays/objects deep, one that overflows
  the parser's recursion (``RecursionError``), bytes that are not in the declared encoding
  or any other ``ValueError`` is a 400 ``ParseError`` (``{"detail": "JSON parse error -
  ..."}``). Bare ``NaN``/``Infinity`` are refused as DRF's strict mode does.
- ``exception_handler`` (REST_FRAMEWORK["EXCEPTION_HANDLER"]): DRF's handler, plus
  1. a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (Django's ``RequestDataTooBig``) is a
     413 ``{"detail": "...", "limit": <bytes>}``;
  2. a ``RecursionError`` raised inside any DRF parser (views that name DRF's own
     ``JSONParser``) is the same 400 as ``StrictJSONParser`` gives. A ``RecursionError``
     from anywhere else stays a 500: it is a bug, not bad input.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from .importers.reader import JSON_MAX_DEPTH, json_depth_exceeds

NESTED = (
    f"JSON parse error - nested too deeply (more than {JSON_MAX_DEPTH} arrays/objects "
    "inside each other)"
)
_DRF_PARSERS = str(Path(JSONParser.__module__.replace(".", "/")).with_suffix(".py"))


def _strict_constant(token: str):
    raise ValueError(f"{token} is not valid JSON")


class StrictJSONParser(JSONParser):
    """JSON bodies; every malformed body is a 400 ``ParseError`` (rules in the module doc)."""

    def parse(self, stream, media_type=None, parser_context=None):
        """Bytes -> the parsed value (dict, list, str, int, float, bool or None); raises
        ``ParseError`` for invalid JSON, nesting over ``JSON_MAX_DEPTH`` or a bad encoding.
        An empty body never reaches a parser (DRF gives ``{}``)."""
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            constant = _strict_constant if api_settings.STRICT_JSON else None
            value = json.loads(text, parse_constant=constant)
        except RecursionError:
            raise ParseError(NESTED) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if json_depth_exceeds(text, value):
            raise ParseError(NESTED)
        return value


def _raised_in_a_parser(exc: BaseException) -> bool:
    """True when ``exc``'s traceback passes through DRF's parsers module."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(_DRF_PARSERS):
            return True
        tb = tb.tb_next
    return False


def exception_handler(exc, context):
    """DRF's ``exception_handler`` plus the 413 for an oversized body and the 400 for a
    ``RecursionError`` in a parser (module doc); None (= a 500) for anything else DRF does
    not handle."""
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
