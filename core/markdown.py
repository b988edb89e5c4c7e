"""User Markdown as HTML with no raw HTML: tags from a fixed list through ``format_html``,
links only relative, http(s) or mailto, images as their alt text."""

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
    """``text`` (at most ``MAX_CHARS`` read) as HTML, headings shifted to h3..h6; raw HTML shown as
    text."""
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
