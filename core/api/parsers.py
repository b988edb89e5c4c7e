"""The strict JSON parser: malformed JSON, depth past ``JSON_MAX_DEPTH``, a repeated key, bare
NaN/Infinity or a bad encoding is a 400; unstorable text a 400 naming its path; a body over
its endpoint's limit a 413 (the read stops one byte past it)."""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import IO, Any, NoReturn

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings

from core.bounds import body_limit_bytes, body_too_large_text, int_digits_plain
from core.errors import DomainError
from core.strict_json import JSON_MAX_DEPTH, json_depth_exceeds, no_duplicate_keys
from core.text import unstorable_refuse

NESTED = (
    f"JSON parse error - nested too deeply (more than {JSON_MAX_DEPTH} arrays/objects "
    "inside each other)"
)


def _strict_constant(token: str) -> NoReturn:
    raise ValueError(f"{token} is not valid JSON")


class StrictJSONParser(JSONParser):
    """JSON bodies; every malformed body is a 400 ``ParseError`` (rules in the module doc)."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        """The parsed value; raises ``ParseError`` for malformed JSON, ``DomainError`` for text the
        database cannot store or a body over the limit."""
        context = parser_context or {}
        encoding = context.get("encoding", settings.DEFAULT_CHARSET)
        data = body_read_capped(
            stream,
            content_length=_content_length(context.get("request")),
            limit=body_limit_bytes(getattr(context.get("view"), "body_limit", None)),
        )
        try:
            text = codecs.decode(data, encoding)
            del data
            constant = _strict_constant if api_settings.STRICT_JSON else None
            # A key twice in one object is refused, never "the last one wins".
            value = json.loads(text, parse_constant=constant, object_pairs_hook=no_duplicate_keys)
        except RecursionError:
            raise ParseError(NESTED) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {int_digits_plain(str(exc))}") from None
        if json_depth_exceeds(text, value):
            raise ParseError(NESTED)
        if "\\u" in text:  # NUL and lone surrogates reach JSON text only as escapes
            unstorable_refuse(value)  # a DomainError: core.api.errors answers 400
        return value


def _content_length(request: object) -> int | None:
    """The request's declared body length in bytes, or None when absent or malformed."""
    raw = getattr(request, "META", {}).get("CONTENT_LENGTH") or ""
    return int(raw) if raw.isdigit() and len(raw) < 20 else None


def body_read_capped(stream: IO[Any], *, content_length: int | None, limit: int) -> bytes:
    """The body, at most ``limit`` bytes; ``DomainError`` (``too_large``, 413) when
    ``content_length`` or the stream says more (at most ``limit`` + 1 bytes read)."""
    if content_length is not None and content_length > limit:
        raise DomainError(
            code="too_large", detail=body_too_large_text(content_length, limit), limit=limit
        )
    data: bytes = stream.read(limit + 1)
    if len(data) > limit:
        raise DomainError(code="too_large", detail=body_too_large_text(None, limit), limit=limit)
    return data
