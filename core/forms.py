"""HTML forms that show text the database cannot store on the field, never a bare 400.

A form post holding U+0000 (NUL) is refused by ``config.middleware.UnstorableFormMiddleware``
before any view reads it, unless the view is marked ``@unstorable_shown_on_form``: it reads
every posted field through a ``StorableForm``, which takes the post as a display copy (each
U+0000 and lone surrogate replaced with U+FFFD, ``core.text.unstorable_replace``) and is
invalid with the refusal on each field that held one. So the user gets the form back with
the typed text (the NUL shown as U+FFFD) and the error, and nothing is stored: the form is
not valid, and what it holds is the display copy, never the posted text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.http import QueryDict

from core.errors import DomainError
from core.text import UNSTORABLE, contains_unstorable, unstorable_replace


def unstorable_display(data: Any) -> tuple[Any, list[str]]:
    """``(display, fields)``: ``data`` (a ``QueryDict`` or a dict of str -> str or list) with
    every U+0000 and lone surrogate in a name or value replaced with U+FFFD, and the names
    (replaced too) of the fields that held one, in posted order. Clean data comes back as
    the same object with ``[]``."""
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
    """A form that is invalid, naming the field, when a posted field (name or value) holds
    U+0000 or a lone surrogate; it holds and shows a display copy (U+FFFD in their place).
    ``unstorable_fields`` lists the fields that held one (names as shown)."""

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
    """View decorator: this view reads every posted field through a ``StorableForm`` and
    re-renders it when invalid, so ``UnstorableFormMiddleware`` lets a post holding U+0000
    reach it instead of answering a bare 400."""
    view.unstorable_shown_on_form = True  # type: ignore[attr-defined]
    return view
