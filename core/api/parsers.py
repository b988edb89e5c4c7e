"""The strict JSON body parser (REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]).

DRF's JSON parser, but a body nested more than ``JSON_MAX_DEPTH`` (64) arrays/objects deep,
one that overflows the parser's recursion (``RecursionError``), bytes that are not in the
declared encoding or any other ``ValueError`` is a 400 ``ParseError`` (``{"detail": "JSON
parse error - ..."}``), and so is a key given twice in one object (never "the last one wins").
Bare ``NaN``/``Infinity`` are refused as DRF's strict mode does. A
string holding U+0000 or a lone surrogate (``\\u0000``, ``\\ud800``) anywhere in the body is
a 400 naming its path as the field (``core.text``: ``{"detail": "head_file.cases[0].key:
holds U+0000 ...", "field": "head_file.cases[0].key"}``), for every API view that takes JSON.
"""

from __future__ import annotations

import codecs
import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings

from core.strict_json import JSON_MAX_DEPTH, json_depth_exceeds, no_duplicate_keys
from core.text import unstorable_refuse

NESTED = (
    f"JSON parse error - nested too deeply (more than {JSON_MAX_DEPTH} arrays/objects "
    "inside each other)"
)


def _strict_constant(token: str):
    raise ValueError(f"{token} is not valid JSON")


class StrictJSONParser(JSONParser):
    """JSON bodies; every malformed body is a 400 ``ParseError`` (rules in the module doc)."""

    def parse(self, stream, media_type=None, parser_context=None):
        """Bytes -> the parsed value (dict, list, str, int, float, bool or None); raises
        ``ParseError`` for invalid JSON, nesting over ``JSON_MAX_DEPTH`` or a bad encoding,
        ``DomainError`` for text the database cannot store.
        An empty body never reaches a parser (DRF gives ``{}``)."""
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            constant = _strict_constant if api_settings.STRICT_JSON else None
            # A key twice in one object is refused, never "the last one wins".
            value = json.loads(text, parse_constant=constant, object_pairs_hook=no_duplicate_keys)
        except RecursionError:
            raise ParseError(NESTED) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if json_depth_exceeds(text, value):
            raise ParseError(NESTED)
        if "\\u" in text:  # NUL and lone surrogates reach JSON text only as escapes
            unstorable_refuse(value)  # a DomainError: core.api.errors answers 400
        return value
