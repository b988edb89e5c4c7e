"""``{{ text|markdown }}``: user-written Markdown as HTML with no raw HTML
(``core.markdown.markdown_html``: tags from a fixed list, every text escaped)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from core.markdown import markdown_html

register = template.Library()


@register.filter(name="markdown")
def markdown(text: str | None) -> SafeString:
    """Render ``text`` (Markdown) as escaped HTML; empty for None."""
    return markdown_html(text or "")
