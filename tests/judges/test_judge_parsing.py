"""Judge reply parsing: fault A2's table (line grammar) and A1-style JSON replies."""

from __future__ import annotations

import json

import pytest

from judges.kinds import default_schema
from judges.parsing import Parsed, ParseError, parse_json_reply, parse_verdict_line, reply_parse

# Fault A2, exactly as in shared/acceptance/faults.md; None means errored (unparseable).
A2_TABLE = [
    ("r0", "VERDICT: PASSFAIL", None),
    ("r1", "verdict: pass", "PASS"),
    ("r2", "VERDICT: PASS.", "PASS"),
    ("r3", "Reasoning: a first-pass verdict: PASS would be too kind.\nVERDICT: FAIL", "FAIL"),
    # Documented choice: zero-width characters are removed first, so r4 is PASS.
    ("r4", "VERDICT:\u200bPASS", "PASS"),
    ("r5", "VERDICT: PASS\nOn reflection I misread the task.\nVERDICT: FAL", None),
    ("grade-ci", "GRADE: CI", None),
    ("no-line", "I think this is mostly fine.", None),
    ("bang", "VERDICT: fail!", "FAIL"),
    ("inside-word", "VERDICT: PASSED", None),
    ("passable", "VERDICT: passable", None),
    ("both-words", "VERDICT: PASS/FAIL", None),
    ("mixed-case", "Verdict: Fail", "FAIL"),
]


@pytest.mark.parametrize(("name", "raw", "expected"), A2_TABLE, ids=[r[0] for r in A2_TABLE])
def test_it_reads_the_documented_verdict_line_grammar(name, raw, expected):
    result = parse_verdict_line(raw)
    if expected is None:
        assert isinstance(result, ParseError)
        assert result.reason == "unparseable"
        assert result.raw == raw
    else:
        assert result == Parsed({"verdict": expected})


def test_it_pins_that_a_zero_width_space_before_the_token_is_removed_and_reads_pass():
    assert parse_verdict_line("VERDICT:\u200bPASS") == Parsed({"verdict": "PASS"})


def test_it_never_falls_back_to_an_earlier_pass_when_the_final_line_is_malformed():
    result = parse_verdict_line("VERDICT: PASS\nVERDICT: FAL")
    assert isinstance(result, ParseError)


SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["PASS", "FAIL"]}},
    "required": ["verdict"],
}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("I think this is mostly fine.", "unparseable"),
        ("", "empty"),
        ("   ", "empty"),
        ('{"verdict": "CI"}', "invalid_verdict"),
        ('{"verdict": "passable"}', "invalid_verdict"),
        ('{"verdict": "PASS/FAIL"}', "invalid_verdict"),
        ('{"verdict": " pass"}', "invalid_verdict"),
        ('{"verdict": "pass."}', "invalid_verdict"),
        ('{"verdict": true}', "invalid_verdict"),
        ('["PASS"]', "unparseable"),
        ('```json\n{"verdict": "PASS"}\n```', "unparseable"),
        ('{"verdict": NaN}', "unparseable"),
        ('{"reasoning": "x"}', "unparseable"),
    ],
)
def test_it_turns_a_bad_json_reply_into_a_typed_error_keeping_the_raw_reply(raw, reason):
    result = parse_json_reply(raw, schema=SCHEMA)
    assert isinstance(result, ParseError)
    assert (result.reason, result.raw) == (reason, raw)


@pytest.mark.parametrize(
    ("word", "expected"), [("pass", "PASS"), ("Fail", "FAIL"), ("pAsS", "PASS"), ("FAIL", "FAIL")]
)
def test_it_reads_a_json_verdict_word_whatever_its_case(word, expected):
    raw = json.dumps({"reasoning": "r", "verdict": word})
    assert parse_json_reply(raw, schema=default_schema("rubric")) == Parsed(
        {"reasoning": "r", "verdict": expected}
    )


def test_it_reads_a_lower_case_pairwise_preference_as_its_slot():
    raw = '{"reasoning": "r", "verdict": "b"}'
    assert parse_json_reply(raw, schema=default_schema("pairwise")) == Parsed(
        {"reasoning": "r", "verdict": "B"}
    )


def test_it_reads_the_shared_mock_judges_lower_case_reply():
    # /work/shared/tools/mockllm in judge mode answers exactly this shape.
    raw = (
        '{"reasoning": "Mock judge: the expected answer was found (attempt 1).", "verdict": "fail"}'
    )
    parsed = reply_parse(raw, reply_format="json", schema=default_schema("rubric"))
    assert isinstance(parsed, Parsed)
    assert parsed.data["verdict"] == "FAIL"


def test_it_reads_a_valid_json_reply():
    assert parse_json_reply(' {"verdict":"FAIL"}\n', schema=SCHEMA) == Parsed({"verdict": "FAIL"})


def test_it_calls_an_id_outside_the_offered_enum_unknown_id():
    schema = default_schema("context_relevance", ids=["doc-1", "doc-2"])
    raw = (
        '{"reasoning": "r", "documents": [{"doc_id": "doc-1", "relevant": true}, '
        '{"doc_id": "doc-9", "relevant": false}]}'
    )
    result = parse_json_reply(raw, schema=schema)
    assert isinstance(result, ParseError)
    assert result.reason == "unknown_id"


def test_it_calls_a_reply_that_contains_the_nonce_a_nonce_leak_whatever_else_it_says():
    result = reply_parse(
        '{"verdict": "PASS", "x": "abc123"}', reply_format="json", schema=SCHEMA, nonce="abc123"
    )
    assert isinstance(result, ParseError)
    assert result.reason == "nonce_leak"


@pytest.mark.parametrize(
    "raw",
    [
        '{"verdict":"FAIL","verdict":"PASS"}',
        '{"reasoning":"r","verdict":"PASS","verdict":"PASS"}',
        '{"reasoning":"a","reasoning":"b","verdict":"FAIL"}',
    ],
)
def test_a_key_twice_in_a_json_reply_is_unparseable_never_the_last_one(raw):
    result = parse_json_reply(raw, schema=SCHEMA)
    assert isinstance(result, ParseError)
    assert result.reason == "unparseable"
    assert "appears twice in one object" in result.message
    assert result.raw == raw


def test_a_json_reply_escaping_unstorable_text_is_read_with_replacements():
    result = parse_json_reply('{"reasoning": "a\\u0000b\\ud800", "verdict": "PASS"}', schema=SCHEMA)
    assert result == Parsed({"reasoning": "a\ufffdb\ufffd", "verdict": "PASS"}, replaced=2)
