"""Word-level diff of two outputs as ``(kind, text)`` tokens: no HTML here; the template wraps
and autoescapes each token, so model output never becomes markup."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# Outputs beyond this many characters are diffed on their first part only (difflib is
# quadratic in the worst case; H1 outputs can be 1,000,000 characters).
DIFF_MAX_CHARS = 20_000
_TOKEN = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class WordDiff:
    """``base``/``head``: ``(kind, text)`` lists, kind "equal", "delete" or "insert"; ``truncated``:
    only the first ``DIFF_MAX_CHARS`` were diffed; ``ratio``: difflib's similarity in [0, 1]."""

    base: list[tuple[str, str]]
    head: list[tuple[str, str]]
    truncated: bool
    ratio: float


def word_diff(base: str, head: str, *, max_chars: int = DIFF_MAX_CHARS) -> WordDiff:
    """A word diff (whitespace runs are tokens, so text is kept exactly), autojunk off."""
    truncated = len(base) > max_chars or len(head) > max_chars
    a, b = _TOKEN.findall(base[:max_chars]), _TOKEN.findall(head[:max_chars])
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            _push(left, "equal", a[i1:i2])
            _push(right, "equal", b[j1:j2])
        else:
            _push(left, "delete", a[i1:i2])
            _push(right, "insert", b[j1:j2])
    return WordDiff(base=left, head=right, truncated=truncated, ratio=matcher.ratio())


def _push(out: list[tuple[str, str]], kind: str, words: list[str]) -> None:
    if not words:
        return
    text = "".join(words)
    if out and out[-1][0] == kind:
        out[-1] = (kind, out[-1][1] + text)
    else:
        out.append((kind, text))
