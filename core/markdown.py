"""Markdown written by users (calibration-set guidelines), rendered without raw HTML.

markdown-it-py parses CommonMark with ``html`` off, so ``<script>`` in the source stays
text. The HTML is then built here from the token stream, never taken from a renderer: each
tag comes from a fixed list (``BLOCK_TAGS``, ``INLINE_TAGS``) through ``format_html``, every
text, code span and attribute value is escaped by it, and a link keeps its target only
when it is relative or http(s)/mailto (anything else becomes plain text). Images are shown
as their alt text (the page loads nothing from elsewhere). Nothing is marked safe by hand: the
pieces are ``SafeString``s that ``format_html`` itself produced.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from markdown_it import MarkdownIt
from markdown_it.token import Token

_PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
MAX_CHARS = 20_000

# token type (without _open/_close) -> HTML tag
BLOCK_TAGS = {
    "paragraph": "p",
    "bullet_list": "ul",
    "ordered_list": "ol",
    "list_item": "li",
    "blockquote": "blockquote",
}
INLINE_TAGS = {"em": "em", "strong": "strong", "s": "s"}
LINK_SCHEMES = ("http", "https", "mailto", "")


def _open(tag: str) -> SafeString:
    return format_html("<{}>", tag)


def _close(tag: str) -> SafeString:
    return format_html("</{}>", tag)


def _href_ok(href: str) -> bool:
    try:
        parts = urlsplit(href)
    except ValueError:
        return False
    return parts.scheme.lower() in LINK_SCHEMES and not href.lstrip().lower().startswith("//")


def _inline(children: list[Token]) -> list[SafeString]:
    out: list[SafeString] = []
    links: list[bool] = []  # per open link: whether an <a> was written
    for tok in children:
        kind = tok.type
        if kind == "text":
            out.append(format_html("{}", tok.content))
        elif kind == "code_inline":
            out.append(format_html("<code>{}</code>", tok.content))
        elif kind == "softbreak":
            out.append(format_html("{}", "\n"))
        elif kind == "hardbreak":
            out.append(format_html("<{}>", "br"))
        elif kind == "image":
            out.append(format_html("{}", tok.content))
        elif kind == "link_open":
            href = str(tok.attrGet("href") or "")
            links.append(_href_ok(href))
            if links[-1]:
                out.append(format_html('<a href="{}" rel="noopener noreferrer">', href))
        elif kind == "link_close":
            if links and links.pop():
                out.append(_close("a"))
        elif kind.endswith(("_open", "_close")) and kind.rsplit("_", 1)[0] in INLINE_TAGS:
            name, edge = kind.rsplit("_", 1)
            tag = INLINE_TAGS[name]
            out.append(_open(tag) if edge == "open" else _close(tag))
        else:  # anything else the parser may add: its text only
            out.append(format_html("{}", tok.content))
    return out


def markdown_html(text: str) -> SafeString:
    """``text`` (Markdown, at most ``MAX_CHARS`` characters are read) as HTML: paragraphs,
    headings (shifted to h3..h6 so they sit under the page's own), lists, block quotes, code
    blocks, rules, emphasis, code spans and safe links. Raw HTML in ``text`` is shown as
    text. Returns a ``SafeString`` built only by ``format_html`` (module docstring)."""
    pieces: list[SafeString] = []
    for tok in _PARSER.parse((text or "")[:MAX_CHARS]):
        kind = tok.type
        if tok.hidden:  # the paragraphs of a tight list item: their text only
            continue
        if kind == "inline":
            pieces.extend(_inline(tok.children or []))
        elif kind in ("heading_open", "heading_close"):
            level = min(6, int(tok.tag[1:]) + 2)
            tag = f"h{level}"
            pieces.append(_open(tag) if kind == "heading_open" else _close(tag))
        elif kind in ("fence", "code_block"):
            pieces.append(format_html("<pre><code>{}</code></pre>", tok.content))
        elif kind == "hr":
            pieces.append(format_html("<{}>", "hr"))
        elif kind.endswith(("_open", "_close")) and kind.rsplit("_", 1)[0] in BLOCK_TAGS:
            name, edge = kind.rsplit("_", 1)
            tag = BLOCK_TAGS[name]
            pieces.append(_open(tag) if edge == "open" else _close(tag))
        elif kind in ("html_block", "html_inline"):  # not produced with html off; text if so
            pieces.append(format_html("<p>{}</p>", tok.content))
    return format_html_join("", "{}", ((p,) for p in pieces))
