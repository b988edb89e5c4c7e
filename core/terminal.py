"""Text printed to a terminal: names, tags, case keys and model output are untrusted.

A suite name, a tag or an agent's disagreement text can hold ESC (U+001B), CSI (U+009B) or
another control character. Written raw to a terminal, ``ESC ] 52 ;`` sets the clipboard,
``ESC [ 2 J`` clears the screen and ``ESC [ 8 m`` hides the rest of a line, so a run report
could print "PASS" over a failing row. Bidirectional overrides (U+202A..U+202E,
U+2066..U+2069) reorder what is shown ("Trojan Source", Boucher and Anderson, 2021,
https://trojansource.codes/). One rule for every command's output (``DomainCommand``):
each such character is printed as its ``\\uXXXX`` escape, which is also a valid escape inside
a JSON string, so the same rule keeps ``--json`` output valid JSON. Newline and tab are
kept (they are layout the command itself writes). Data written to a file or piped as a
file format (``export_run --out -``) is not terminal text and is not changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.management.base import OutputWrapper

# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings/overrides/isolates,
# and the line/paragraph separators (which JSON allows raw but terminals treat as breaks).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_escape(text: str) -> str:
    """``text`` with every control, bidi-override and line-separator character (the
    ``_CONTROL`` class) replaced by its six-character ``\\uXXXX`` escape; other text as is.
    ``terminal_escape("a\\x1b[2Jb") == "a\\\\u001b[2Jb"``."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class TerminalOutput(OutputWrapper):
    """A command's stdout/stderr that escapes what ``terminal_escape`` escapes in every
    message before Django's wrapper writes it (and adds the ending)."""

    # OutputWrapper.write's own signature, which is not TextIOBase.write's (Django's stubs
    # ignore the same error on it).
    def write(  # type: ignore[override]
        self,
        msg: str = "",
        style_func: Callable[[str], str] | None = None,
        ending: str | None = None,
    ) -> None:
        super().write(terminal_escape(str(msg)), style_func=style_func, ending=ending)
