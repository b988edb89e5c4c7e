"""A config value as an error message shows it: cut to a length, and never a key
(docs/providers/openai-compatible.md)."""

from __future__ import annotations

from core.errors import value_shown as value_as_written
from providers.endpoint import looks_like_a_key

KEY_NOT_SHOWN = "a value that looks like a key (not shown)"


def value_shown(value: object, limit: int = 80) -> str:
    """``value`` as the input wrote it (``core.errors.value_shown``: JSON text, cut to ``limit``
    characters); ``KEY_NOT_SHOWN`` for a value that ``providers.endpoint.looks_like_a_key``
    says is a key, pasted into the wrong field."""
    if looks_like_a_key(value):
        return KEY_NOT_SHOWN
    return value_as_written(value, limit=limit)
