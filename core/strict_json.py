"""Strict JSON for reports, comparisons and exports: a non-finite number is "missing", so it
becomes null, and callers dump with ``allow_nan=False``."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import numpy as np

from core.bounds import int_digits_plain
from core.decimals import decimal_plain

# Values returned as they are, tested by exact type first: most of a response is these,
# and an API page of 100 trials holds ~1,500 of them.
_PLAIN = frozenset({str, int, bool, type(None)})


def json_safe(value: Any) -> Any:
    """``value`` with keys as strings, tuples as lists, non-finite floats and Decimals as None,
    Decimals as plain strings (``core.decimals``), numpy scalars as Python ones."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, dict):
        return {str(k): v if type(v) in _PLAIN else json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [v if type(v) in _PLAIN else json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return decimal_plain(value) if value.is_finite() else None
    return value


JSON_MAX_DEPTH = 64  # arrays/objects inside each other in one JSON value


class _NonFinite:
    """Marker for a bare NaN/Infinity/-Infinity token in JSONL (not valid JSON)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return self.token


def _non_finite(token: str) -> _NonFinite:
    return _NonFinite(token)


NON_FINITE = _NonFinite  # the type, for isinstance checks by field validators


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a repeated key is a ``ValueError`` (json keeps the last silently)."""
    obj = dict(pairs)  # in C: one call per object of every record read
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def json_depth_exceeds(text: str | bytes, value: Any, *, limit: int = JSON_MAX_DEPTH) -> bool:
    """True when ``value`` nests deeper than ``limit``; walks only when ``text`` holds more than
    ``limit`` brackets."""
    opens = (
        text.count("[") + text.count("{")
        if isinstance(text, str)
        else text.count(b"[") + text.count(b"{")
    )
    if opens <= limit:
        return False
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))
    return False


def json_nesting_error(text: str) -> json.JSONDecodeError:
    """The error at the first bracket past ``JSON_MAX_DEPTH`` (line, column)."""
    depth, in_string, escaped, pos = 0, False, False, 0
    for pos, char in enumerate(text):  # noqa: B007 (pos is read after the loop)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > JSON_MAX_DEPTH:
                break
        elif char in "]}":
            depth -= 1
    return json.JSONDecodeError(
        f"nested too deeply (more than {JSON_MAX_DEPTH} arrays/objects inside each other)",
        text,
        pos,
    )


# One decoder for every line: ``json.loads`` with options builds a decoder and its scanner
# per call (~1.5 µs; 50,000 ingest records a request).
_DECODER = json.JSONDecoder(parse_constant=_non_finite, object_pairs_hook=no_duplicate_keys)


def json_loads_line(text: str) -> Any:
    """One JSON document; bare NaN/Infinity become ``NON_FINITE``. A repeated key or nesting past
    ``JSON_MAX_DEPTH`` raises ``ValueError`` (never ``RecursionError``)."""
    try:
        if type(text) is str and not text.startswith("\ufeff"):
            value = _DECODER.decode(text)  # what json.loads does for such text, minus its setup
        else:  # bytes, or a BOM (json.loads says so): as json.loads does
            value = json.loads(
                text, parse_constant=_non_finite, object_pairs_hook=no_duplicate_keys
            )
    except RecursionError:
        raise json_nesting_error(text) from None
    except ValueError as exc:
        if "int_max_str_digits" in str(exc):  # a number of more than 4,300 digits
            raise ValueError(int_digits_plain(str(exc))) from None
        raise
    if json_depth_exceeds(text, value):
        raise json_nesting_error(text)
    return value


def nesting_path_past(value: Any, *, limit: int = JSON_MAX_DEPTH, path: str = "") -> str | None:
    """The path of the first container nested deeper than ``limit`` (past 8 steps "..."), or None.
    Walks without recursion (TOML's dotted keys nest without brackets)."""
    stack: list[tuple[Any, int, list[str]]] = [(value, 1, [path] if path else [])]
    while stack:
        node, depth, steps = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if depth > limit:
            shown = "".join(
                step if step.startswith("[") or i == 0 else f".{step}"
                for i, step in enumerate(steps[:8])
            )
            return shown + ("..." if len(steps) > 8 else "")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, dict | list):
                step = f"[{key}]" if isinstance(node, list) else str(key)
                stack.append((child, depth + 1, [*steps, step] if len(steps) <= 8 else steps))
    return None


def contains_non_finite(value: Any) -> bool:
    """True when ``value`` (a parsed JSON value) holds a bare NaN/Infinity marker anywhere."""
    if isinstance(value, _NonFinite):
        return True
    if isinstance(value, dict):
        return any(contains_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_non_finite(v) for v in value)
    return False


def json_loads_strict(text: str) -> Any:
    """A JSON document typed by a person; raises ``ValueError`` saying which rule failed (syntax,
    repeated key, depth, NaN/Infinity)."""
    value = json_loads_line(text)
    if contains_non_finite(value):
        raise ValueError("NaN and Infinity are not valid JSON: give a number")
    return value
