"""What a reader sees of a page: its text without tags, attributes, scripts or styles, so an
assertion about the shown text (no "nan", no "NaN") cannot trip on a random CSRF token or an
id in an attribute."""

from __future__ import annotations

import html
import re

_HIDDEN = re.compile(r"<script\b.*?</script>|<style\b.*?</style>|<[^>]*>", re.S | re.I)


def visible_text(page: str) -> str:
    """``page`` (HTML) as the text shown: tags, their attributes, scripts and styles removed
    (each replaced by a space), entities unescaped."""
    return html.unescape(_HIDDEN.sub(" ", page))


def shows_word(page: str, word: str) -> bool:
    """Whether ``word`` appears as a whole word in ``page``'s visible text, ignoring case."""
    return re.search(rf"\b{re.escape(word)}\b", visible_text(page), re.I) is not None
