"""Commands print untrusted names, tags and model output: control and bidi-override
characters come out as ``\\uXXXX`` escapes, in text and in ``--json`` (which stays JSON)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from core.terminal import terminal_escape
from tests.report_builders import add_trial, make_run

HOSTILE = "ok\x1b[2J\x1b]52;c;cHduZWQ=\x07\u009b31m\u202eSSAP\u2066\x00\x7f\u2028end"
RAW = ["\x1b", "\x07", "\u009b", "\u202e", "\u2066", "\x00", "\x7f", "\u2028"]


def test_each_control_character_prints_as_its_escape():
    assert terminal_escape("a\x1b[2Jb") == "a\\u001b[2Jb"
    assert terminal_escape("\u009b\u202e\u2066") == "\\u009b\\u202e\\u2066"
    assert terminal_escape("line 1\nline\t2 é ✓ 日本") == "line 1\nline\t2 é ✓ 日本"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_no_control_character_survives_and_json_strings_stay_json(text):
    escaped = terminal_escape(text)
    assert not any(ch in escaped for ch in RAW)
    # Inside a JSON string the escape is JSON's own: decoding gives the text back.
    encoded = json.dumps(text, ensure_ascii=False)
    assert json.loads(terminal_escape(encoded)) == text


@pytest.mark.django_db
@pytest.mark.parametrize("as_json", [False, True])
def test_run_report_escapes_a_hostile_suite_name_tag_and_case(as_json):
    run = make_run(
        cases=[(f"case{HOSTILE}", [f"tag{HOSTILE}"])],
        graders=[{"key": "policy", "kind": "python"}],
        suite=f"suite{HOSTILE}",
        name=f"run{HOSTILE}",
    )
    add_trial(run, f"case{HOSTILE}", 1, grades={"policy": True})
    out, err = StringIO(), StringIO()
    call_command(
        "run_report", str(run.uuid), *(["--json"] if as_json else []), stdout=out, stderr=err
    )
    text = out.getvalue()
    assert not any(ch in text for ch in RAW)
    assert "\\u001b[2J" in text and "\\u202e" in text
    if as_json:
        data = json.loads(text)
        assert data["suite_name"] == f"suite{HOSTILE}"
    else:
        assert f"suite{terminal_escape(HOSTILE)}" in text
