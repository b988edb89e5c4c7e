"""Prompt templates for targets and judges: ``string.Template`` syntax. A known name in braces
(``{input}``) is refused, since it would be sent literally for every case."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence

from core.errors import DomainError

# A name between braces, single or doubled, with optional spaces: the other syntax.
BRACED_NAME = re.compile(r"\{+\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}+")


def placeholder_list(names: Iterable[str]) -> str:
    """``$input, $expected`` for the names given, in their order."""
    return ", ".join(f"${name}" for name in names)


def placeholders_check(
    template: str,
    *,
    field: str,
    offered: Sequence[str],
    recognised: Iterable[str] = (),
    context: str = "",
    error: type[DomainError] = DomainError,
) -> list[str]:
    """The names ``template`` uses, in order of first use. Raises ``error`` naming ``field`` when:
    1. the text writes an offered or ``recognised`` name in braces;
    2. a ``$`` is neither ``$name``, ``${name}`` nor ``$$``;
    3. a ``$name`` is not ``offered`` (``context``: by what, e.g. "by a faithfulness judge").
    Every message lists the offered placeholders."""
    listing = placeholder_list(offered)
    known = set(offered) | set(recognised)
    matches = list(string.Template.pattern.finditer(template))
    literals, start = [], 0
    for match in matches:
        literals.append(template[start : match.start()])
        start = match.end()
    literals.append(template[start:])
    for literal in literals:
        for braced in BRACED_NAME.finditer(literal):
            name = braced.group(1)
            if name in known:
                raise error(
                    f"uses {braced.group(0)}; write ${name} (placeholders: {listing})",
                    field=field,
                )
    names: list[str] = []
    for match in matches:
        if match.group("invalid") is not None:
            at = match.start()
            line = template.count("\n", 0, at) + 1
            column = at - (template.rfind("\n", 0, at) + 1) + 1
            shown = re.match(r"\$\S{0,19}", template[at:])
            assert shown is not None  # the invalid group starts at a "$"
            snippet = shown.group(0)
            raise error(
                f"{snippet!r} at line {line}, column {column} is not a placeholder: write "
                f"$name or ${{name}} for a placeholder and $$ for a literal $ "
                f"(placeholders: {listing})",
                field=field,
            )
        name = match.group("named") or match.group("braced")
        if name is None:
            continue  # $$
        if name not in offered:
            if name in known and context:
                raise error(
                    f"${name} is not offered {context} (placeholders: {listing})", field=field
                )
            raise error(
                f"unknown placeholder ${name} (placeholders: {listing}; $$ for a literal $)",
                field=field,
            )
        if name not in names:
            names.append(name)
    return names
