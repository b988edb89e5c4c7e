"""Terminal output of untrusted text (names, tags, model output): control and bidi-override
characters (escape sequences, "Trojan Source", Boucher and Anderson, 2021) are printed as
``\\uXXXX``, which keeps ``--json`` valid. Newline and tab are kept; file output is not
changed."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.management.base import OutputWrapper

# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings/overrides/isolates,
# and the line/paragraph separators (which JSON allows raw but terminals treat as breaks).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_escape(text: str) -> str:
    """``text`` with each ``_CONTROL`` character as its ``\\uXXXX`` escape."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class TerminalOutput(OutputWrapper):
    """A command's stdout/stderr applying ``terminal_escape`` to every message."""

    # OutputWrapper.write's own signature, which is not TextIOBase.write's (Django's stubs
    # ignore the same error on it).
    def write(  # type: ignore[override]
        self,
        msg: str = "",
        style_func: Callable[[str], str] | None = None,
        ending: str | None = None,
    ) -> None:
        super().write(terminal_escape(str(msg)), style_func=style_func, ending=ending)
