"""Forms that show text the database cannot store on its field (U+FFFD in place) instead of
``UnstorableFormMiddleware``'s 400; nothing such a post holds is stored."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from django import forms
from django.http import QueryDict

from core.errors import DomainError
from core.text import UNSTORABLE, contains_unstorable, unstorable_replace


def unstorable_display(data: Any) -> tuple[Any, list[str]]:
    """``(display, fields)``: ``data`` with U+0000 and lone surrogates (names and values) as
    U+FFFD, and the names of the fields that held one. Clean data: the same object and ``[]``."""
    pairs = data.lists() if hasattr(data, "lists") else data.items()
    fields: list[str] = []
    display = QueryDict(mutable=True)
    for name, values in pairs:
        listed = list(values) if isinstance(values, list | tuple) else [values]
        clean_name, _ = unstorable_replace(name)
        if contains_unstorable(name) or any(contains_unstorable(v) for v in listed):
            fields.append(clean_name)
        display.setlist(clean_name, [unstorable_replace(v)[0] for v in listed])
    if not fields:
        return data, []
    return display, fields


# A JSON string literal (an unterminated one runs to the end), or a bare word outside one:
# the text is scanned whether or not it parses, since a form is re-rendered because it did not.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)|[^\s"{}\[\]:,]+')


def json_text_withheld(text: str, secret: Callable[[object], bool]) -> str:
    """``text`` (JSON, valid or not) with every string literal and bare word that ``secret``
    says is a secret written as ``""``; the rest as it was typed."""

    def withheld(match: re.Match[str]) -> str:
        token = match.group()
        if token.startswith('"'):
            try:
                value: object = json.loads(token)
            except ValueError:  # unterminated, or a bad escape: the text between the quotes
                value = token[1:].removesuffix('"')
        else:
            value = token
        return '""' if secret(value) else token

    return _JSON_TOKEN.sub(withheld, text)


def data_withheld(
    data: Any,
    *,
    fields: tuple[str, ...],
    json_fields: tuple[str, ...],
    secret: Callable[[object], bool],
) -> Any:
    """A copy of posted ``data`` in which a value of ``fields`` that ``secret`` accepts is
    empty, and ``json_fields`` are ``json_text_withheld``; ``data`` itself when nothing is."""
    shown = QueryDict(mutable=True)
    pairs = data.lists() if hasattr(data, "lists") else data.items()
    changed = False
    for name, values in pairs:
        listed = list(values) if isinstance(values, list | tuple) else [values]
        kept: list[Any] = []
        for value in listed:
            if name in fields and secret(value):
                value = ""
            elif name in json_fields and isinstance(value, str):
                value = json_text_withheld(value, secret)
            changed = changed or value != listed[len(kept)]
            kept.append(value)
        shown.setlist(name, kept)
    return shown if changed else data


class StorableForm(forms.Form):
    """Invalid on each posted field holding U+0000 or a lone surrogate (``unstorable_fields``);
    holds the display copy. A subclass naming ``withheld_fields`` / ``withheld_json_fields``
    and a ``withheld_secret`` test never shows such a value back once the form is cleaned
    (``data_withheld``): a re-rendered form holds "" in its place."""

    withheld_fields: ClassVar[tuple[str, ...]] = ()
    withheld_json_fields: ClassVar[tuple[str, ...]] = ()
    withheld_secret: ClassVar[Callable[[object], bool] | None] = None

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        self.unstorable_fields: list[str] = []
        if data is not None:
            data, self.unstorable_fields = unstorable_display(data)
        super().__init__(data, *args, **kwargs)

    def full_clean(self) -> None:
        super().full_clean()
        by_html_name = {self.add_prefix(name): name for name in self.fields}
        for posted in self.unstorable_fields:
            name = by_html_name.get(posted)
            error = DomainError(f"{UNSTORABLE}; nothing was saved", field=name or posted)
            self.add_error(name, str(error))
        secret = type(self).withheld_secret
        if self.is_bound and secret is not None:
            # After cleaning, so ``cleaned_data`` holds what was posted; whatever re-renders the
            # form later (its own errors, a service's error shown on it) shows the withheld copy.
            self.data = data_withheld(
                self.data,
                fields=tuple(self.add_prefix(name) for name in self.withheld_fields),
                json_fields=tuple(self.add_prefix(name) for name in self.withheld_json_fields),
                secret=secret,
            )


V = TypeVar("V", bound=Callable[..., Any])


def unstorable_shown_on_form(view: V) -> V:
    """View decorator: the view re-renders a ``StorableForm``, so the middleware lets U+0000 in."""
    view.unstorable_shown_on_form = True  # type: ignore[attr-defined]
    return view
