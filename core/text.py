"""Text the database cannot store (U+0000, lone surrogates), handled where it comes in:
refused naming the field from files, API bodies and forms (``unstorable_refuse``), replaced
with U+FFFD in model and judge replies, the count recorded under ``REPLACED_KEY``
(``unstorable_replace``)."""

from __future__ import annotations

import json
import re
from typing import Any

from core.errors import DomainError

UNSTORABLE = (
    "holds U+0000 (NUL) or an unpaired surrogate (U+D800..U+DFFF), which the database cannot store"
)
REPLACEMENT = "\ufffd"
# The key under which a trial's ``raw_response`` and a grade's ``details`` record how many
# characters of a reply were replaced with U+FFFD.
REPLACED_KEY = "unstorable_replaced"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def replaced_record(raw_response: Any) -> dict[str, int]:
    """``{field: characters replaced}`` from a reply's ``raw_response``; empty when none."""
    if isinstance(raw_response, dict) and isinstance(raw_response.get(REPLACED_KEY), dict):
        return dict(raw_response[REPLACED_KEY])
    return {}


def contains_unstorable(value: Any) -> bool:
    """True when any string of a parsed value (keys included) holds U+0000 or a lone surrogate."""
    return unstorable_path(value) is not None


def unstorable_path(value: Any, path: str = "") -> str | None:
    """The path to the first unstorable string (``"cases[3].key"``), or None. No recursion."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _UNSTORABLE.search(node) is not None:
                return where
        elif isinstance(node, dict):
            items = list(node.items())
            for key, child in reversed(items):
                key_text = str(key)
                if isinstance(key, str) and _UNSTORABLE.search(key) is not None:
                    return where
                stack.append((child, f"{where}.{key_text}" if where else key_text))
        elif isinstance(node, list | tuple):
            stack.extend((node[i], f"{where}[{i}]") for i in reversed(range(len(node))))
    return None


def unstorable_refuse(
    value: Any, *, field: str = "", record: str | int | None = None, where: str = ""
) -> None:
    """Raise ``DomainError`` (``invalid``) when ``value`` holds one: ``field`` plus the inner
    path, ``record``, ``where`` prefixing the sentence ("line 3")."""
    found = unstorable_path(value, field)
    if found is None:
        return
    if where:
        raise DomainError(
            UNSTORABLE, field=found, record=record, detail=f"{where}: field {found}: {UNSTORABLE}"
        )
    raise DomainError(UNSTORABLE, field=found, record=record)


def unstorable_refuse_params(params: Any) -> None:
    """``DomainError`` naming the first query or form parameter holding one (the name shown with
    U+FFFD)."""
    for name, values in params.lists():
        field, _ = unstorable_replace(name)
        if contains_unstorable(name) or any(contains_unstorable(v) for v in values):
            raise DomainError(UNSTORABLE, field=field)


def unstorable_replace(value: Any) -> tuple[Any, int]:
    """``(clean, count)``: a copy with each U+0000 and lone surrogate as U+FFFD (keys included;
    tuples as lists). A clean value comes back as the same object with 0."""
    if isinstance(value, dict | list | tuple) and _clean_as_json(value):
        return value, 0
    return _replace_walk(value)


def _clean_as_json(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """True when ``value`` surely holds none: its C-encoded JSON text (``ensure_ascii=False``)
    holds no ``\\u0000`` nor a surrogate. False means "walk it"; far cheaper than the walk."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return False
    return "\\u0000" not in text and _SURROGATE.search(text) is None


def _replace_walk(value: Any) -> tuple[Any, int]:
    """``unstorable_replace`` by walking ``value``."""
    if isinstance(value, str):
        clean, count = _UNSTORABLE.subn(REPLACEMENT, value)
        return (clean, count) if count else (value, 0)
    if isinstance(value, dict):
        total, out = 0, {}
        for key, child in value.items():
            new_key, n_key = _replace_walk(key) if isinstance(key, str) else (key, 0)
            new_child, n_child = _replace_walk(child)
            out[new_key] = new_child
            total += n_key + n_child
        return (out, total) if total else (value, 0)
    if isinstance(value, list | tuple):
        pairs = [_replace_walk(child) for child in value]
        total = sum(n for _, n in pairs)
        return ([child for child, _ in pairs], total) if total else (value, 0)
    return value, 0
