"""Text the database cannot store: one rule for every path that writes user text.

U+0000 (NUL) and unpaired surrogates (U+D800..U+DFFF) reach Python through JSON escapes
(``\\u0000``, ``\\ud800``); PostgreSQL text columns refuse NUL and UTF-8 cannot encode a
lone surrogate, so a value holding one fails late (at insert, or when a page or the API
renders it) unless it is refused where it comes in, naming the field.
"""

from __future__ import annotations

import re
from typing import Any

UNSTORABLE = (
    "holds U+0000 (NUL) or an unpaired surrogate (U+D800..U+DFFF), which the database cannot store"
)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def contains_unstorable(value: Any) -> bool:
    """True when a parsed value holds U+0000 or a lone surrogate in any string (dict keys
    included): JSON can escape them (``\\u0000``, ``\\ud800``), UTF-8 text columns cannot
    hold them."""
    if isinstance(value, str):
        return _UNSTORABLE.search(value) is not None
    if isinstance(value, dict):
        return any(contains_unstorable(k) or contains_unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(contains_unstorable(v) for v in value)
    return False
