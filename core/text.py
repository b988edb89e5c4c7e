"""Text the database cannot store: one boundary rule for everything that comes from outside.

U+0000 (NUL) and unpaired surrogates (U+D800..U+DFFF) reach Python through JSON escapes
(``\\u0000``, ``\\ud800``), a raw NUL byte, or a pipeline's own strings. PostgreSQL text and
jsonb columns refuse NUL, and UTF-8 cannot encode a lone surrogate (SQLite stores NUL but
not a surrogate), so a value holding one fails late — at insert, or when a page or the API
renders it — unless it is handled where it comes in. Two policies, both here:

- **refuse** (files, API bodies, form posts: the sender can fix them): ``unstorable_refuse``
  raises ``DomainError`` naming the field (and the path inside it) and the record;
- **replace** (model and judge replies: nobody can resend them): ``unstorable_replace``
  puts U+FFFD (REPLACEMENT CHARACTER) in their place and says how many it replaced, and
  the trial or grade records that it did (``REPLACED_KEY``), so the page can show it.

The same behaviour on SQLite and PostgreSQL: nothing holding one reaches either.
"""

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
    """``{field: characters replaced}`` as a reply's ``raw_response`` records it under
    ``REPLACED_KEY`` (``evals.runner.targets.base.result_storable`` writes it); empty when
    nothing was replaced."""
    if isinstance(raw_response, dict) and isinstance(raw_response.get(REPLACED_KEY), dict):
        return dict(raw_response[REPLACED_KEY])
    return {}


def contains_unstorable(value: Any) -> bool:
    """True when a parsed value holds U+0000 or a lone surrogate in any string (dict keys
    included): JSON can escape them (``\\u0000``, ``\\ud800``), UTF-8 text columns cannot
    hold them."""
    return unstorable_path(value) is not None


def unstorable_path(value: Any, path: str = "") -> str | None:
    """Where the first unstorable character sits in a parsed value: ``path`` extended by the
    keys and indexes leading to the string (``"cases[3].key"``; ``path`` itself for a bare
    string or a bad dict key), or None when there is none. Walks without recursion."""
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
    """The refuse policy: raise ``DomainError`` (code ``invalid``) when ``value`` holds an
    unstorable character anywhere. ``field`` names the input (the path inside it is
    appended: ``head_file.cases[0].key``), ``record`` the row or record index, ``where`` a
    prefix for the sentence ("line 3"). Returns None when ``value`` is clean."""
    found = unstorable_path(value, field)
    if found is None:
        return
    if where:
        raise DomainError(
            UNSTORABLE, field=found, record=record, detail=f"{where}: field {found}: {UNSTORABLE}"
        )
    raise DomainError(UNSTORABLE, field=found, record=record)


def unstorable_refuse_params(params: Any) -> None:
    """The refuse policy for query strings and form posts (a ``QueryDict``, or anything with
    ``lists()`` of ``(name, [values])``): ``DomainError`` naming the first parameter whose name
    or a value holds an unstorable character (a bad name is shown with U+FFFD in its place)."""
    for name, values in params.lists():
        field, _ = unstorable_replace(name)
        if contains_unstorable(name) or any(contains_unstorable(v) for v in values):
            raise DomainError(UNSTORABLE, field=field)


def unstorable_replace(value: Any) -> tuple[Any, int]:
    """The replace policy: ``(clean, count)``, ``clean`` a copy of ``value`` (str, dict,
    list, tuple as list; other values as they are) with every U+0000 and lone surrogate
    replaced by U+FFFD, dict keys included, and ``count`` the characters replaced. A clean
    value comes back as the same object with count 0."""
    if isinstance(value, dict | list | tuple) and _clean_as_json(value):
        return value, 0
    return _replace_walk(value)


def _clean_as_json(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """True when ``value`` surely holds no unstorable character in any string, dict keys
    included: its JSON text (the C encoder with ``ensure_ascii=False`` writes U+0000 as the
    six characters ``\\u0000`` and a lone surrogate as itself) holds neither. False means
    "walk it" (``_replace_walk``): a string holding the text ``\\u0000``, or a value that
    is not JSON (the walk keeps such values as they are). A model's reply is clean almost
    always, and this check costs a fraction of the walk (issue 17, worker CPU per trial)."""
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
