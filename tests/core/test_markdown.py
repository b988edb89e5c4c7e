"""core.markdown: reviewers' guidelines as HTML with no raw HTML and no unsafe link."""

from __future__ import annotations

from django.template import Context, Template
from django.utils.safestring import SafeString

from core.markdown import markdown_html


def test_it_renders_the_common_markdown():
    html = markdown_html(
        "# Criterion\n\nMark **fail** when the answer *invents* a `policy`.\n\n"
        "- one\n- two\n\n1. first\n\n> quoted\n\n```\ncode <b>\n```\n\n---\n"
    )
    assert isinstance(html, SafeString)
    assert "<h3>Criterion</h3>" in html  # shifted under the page's own headings
    assert "<strong>fail</strong>" in html and "<em>invents</em>" in html
    assert "<code>policy</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html  # tight list: no <p> inside
    assert "<ol><li>first</li></ol>" in html
    assert "<blockquote><p>quoted</p></blockquote>" in html
    assert "<pre><code>code &lt;b&gt;\n</code></pre>" in html
    assert "<hr>" in html


def test_raw_html_is_text_and_only_safe_links_are_links():
    html = markdown_html(
        "<script>alert(1)</script> <img src=x onerror=alert(2)>\n\n"
        '[ok](https://example.com/?a=1&b="2") [bad](javascript:alert(3)) '
        "[data](data:text/html,x) ![pic <i>](http://x/y.png)"
    )
    assert "<script" not in html and "<img" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert (
        '<a href="https://example.com/?a=1&amp;b=%222%22" rel="noopener noreferrer">ok</a>' in html
    )
    assert "[bad](javascript:alert(3))" in html  # not a link: shown as written
    assert html.count("<a ") == 1  # neither javascript: nor data: became a link
    assert "pic &lt;i&gt;" in html  # an image is its alt text


def test_the_template_filter_is_escaped_markup():
    out = Template("{% load markup %}{{ text|markdown }}").render(
        Context({"text": "**bold** <b>raw</b>"})
    )
    assert out == "<p><strong>bold</strong> &lt;b&gt;raw&lt;/b&gt;</p>"
    assert Template("{% load markup %}{{ text|markdown }}").render(Context({"text": None})) == ""
