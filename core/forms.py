"""Forms that show text the database cannot store on its field (U+FFFD in place) instead of
``UnstorableFormMiddleware``'s 400; nothing such a post holds is stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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


class StorableForm(forms.Form):
    """Invalid on each posted field holding U+0000 or a lone surrogate (``unstorable_fields``);
    holds the display copy."""

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


V = TypeVar("V", bound=Callable[..., Any])


def unstorable_shown_on_form(view: V) -> V:
    """View decorator: the view re-renders a ``StorableForm``, so the middleware lets U+0000 in."""
    view.unstorable_shown_on_form = True  # type: ignore[attr-defined]
    return view
