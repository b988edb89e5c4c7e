"""core.forms: a form post holding U+0000 is shown on the field, never stored."""

from __future__ import annotations

from django import forms
from django.http import QueryDict

from core.forms import StorableForm, json_text_withheld, unstorable_display
from core.text import UNSTORABLE


class NoteForm(StorableForm):
    note = forms.CharField()
    count = forms.IntegerField(required=False)


def test_clean_data_comes_back_as_the_same_object():
    data = QueryDict("note=hi&count=2")
    assert unstorable_display(data) == (data, [])


def test_display_copy_replaces_nul_in_names_and_values_and_lists_the_fields():
    data = QueryDict(mutable=True)
    data.setlist("note", ["a\x00b", "c"])
    data.setlist("ok", ["fine"])
    data.setlist("bad\x00", ["x"])
    display, fields = unstorable_display(data)
    assert fields == ["note", "bad\ufffd"]
    assert display.getlist("note") == ["a\ufffdb", "c"]
    assert display.getlist("ok") == ["fine"]
    assert display.getlist("bad\ufffd") == ["x"]
    assert data.getlist("note") == ["a\x00b", "c"]  # the post itself is not changed


def test_a_plain_dict_is_read_too():
    display, fields = unstorable_display({"note": "a\x00"})
    assert (display.getlist("note"), fields) == (["a\ufffd"], ["note"])


def test_the_form_is_invalid_naming_the_field_and_holds_the_display_copy():
    form = NoteForm({"note": "a\x00b", "count": "3"})
    assert not form.is_valid()
    assert form.errors == {"note": [f"note: {UNSTORABLE}; nothing was saved"]}
    assert form["note"].value() == "a\ufffdb"
    assert "note" not in form.cleaned_data and form.cleaned_data["count"] == 3


def test_an_unknown_field_is_a_non_field_error_and_a_prefix_is_read():
    form = NoteForm({"p-note": "ok", "p-other": "\x00"}, prefix="p")
    assert not form.is_valid()
    assert form.non_field_errors() == [f"p-other: {UNSTORABLE}; nothing was saved"]
    form = NoteForm({"p-note": "\x00"}, prefix="p")
    assert form.errors == {"note": [f"note: {UNSTORABLE}; nothing was saved"]}


def test_a_clean_post_is_valid():
    form = NoteForm({"note": "fine"})
    assert form.is_valid() and form.cleaned_data["note"] == "fine"


def _secret(value: object) -> bool:
    return isinstance(value, str) and value.startswith("sk-")


class KeyForm(StorableForm):
    withheld_fields = ("key_env",)
    withheld_json_fields = ("params",)
    withheld_secret = _secret

    key_env = forms.CharField(required=False)
    params = forms.CharField(required=False)
    count = forms.IntegerField()


def test_every_json_string_or_word_that_is_a_secret_is_written_empty_the_rest_as_typed():
    text = '{"a": {"b": ["sk-1", "keep"]},  "sk-2": 3, "n": 12}'
    assert json_text_withheld(text, _secret) == '{"a": {"b": ["", "keep"]},  "": 3, "n": 12}'
    # Not JSON (the reason the form is shown again): a bare word, an unterminated string.
    assert json_text_withheld('{"k": sk-3, "x": "ok"', _secret) == '{"k": "", "x": "ok"'
    assert json_text_withheld('{"k": "sk-4\n}', _secret) == '{"k": ""'
    assert json_text_withheld('{"k": "\\u0073k-5"}', _secret) == '{"k": ""}'


def test_a_cleaned_form_shows_no_secret_back_but_cleaned_data_keeps_what_was_posted():
    form = KeyForm(QueryDict('key_env=sk-x&params={"k": "sk-y", "v": 1}&count=nope'))
    assert not form.is_valid()
    assert form["key_env"].value() == "" and form["params"].value() == '{"k": "", "v": 1}'
    assert form["count"].value() == "nope"
    assert form.cleaned_data["key_env"] == "sk-x"
    plain = KeyForm(QueryDict("key_env=NAME&params={}&count=1"))
    assert plain.is_valid() and plain["key_env"].value() == "NAME"
