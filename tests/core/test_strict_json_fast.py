"""``json_loads_fast``: orjson's answer only where it equals ``json_loads_line``'s, None
(the caller's slow path) everywhere else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.strict_json import JSON_MAX_DEPTH, json_loads_fast, json_loads_line


def same(a, b) -> bool:
    """Equal and of the same types all the way down (1 and 1.0 differ, True and 1 too)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize(
    "text",
    [
        '{"case_id": "c1", "output": "say \\"hi\\"", "passed": true, "score": 0.5}',
        '{"a": "back\\\\slash", "b": "\\\\\\"", "c": "\\\\", "d": ["x", {"e": null}]}',
        '{"n": 922337203685477580, "m": -123456789012345678, "f": 1e308, "g": -0.0}',
        '{"t": "caf\\u00e9 \\n tab\\t", "u": "\u00e9\u4e2d", "emoji": "\U0001f600"}',
        '  {"a": {}, "b": [], "c": ""}  ',
    ],
)
def test_it_gives_what_the_standard_reader_gives(text):
    fast = json_loads_fast(text.encode())
    assert fast is not None
    assert same(fast, json_loads_line(text))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": 1, "a": 2}', "a key twice"),
        ('{"x": {"a": "1", "b": 2, "a": "3"}}', "a key twice, nested"),
        ('{"a": "\\\\", "a": "\\""}', "a key twice among escapes"),
        ('{"a": 18446744073709551616}', "past 64 bits: orjson makes it a float"),
        ('{"a": -9223372036854775809}', "past 64 bits, negative"),
        ('{"a": 1e400}', "overflows to infinity"),
        ('{"score": NaN}', "a bare NaN token"),
        ('{"a": "\\ud800"}', "a lone surrogate escape"),
        ('{"a": "\\u0000"}', "a NUL escape"),
        ('{"a": 1}\r{"b": 2}', "a lone CR (a line break in the text imports)"),
        ('\ufeff{"a": 1}', "a BOM"),
        ('{"a": [1,]}', "invalid JSON"),
        ("[" * (JSON_MAX_DEPTH + 1) + "]" * (JSON_MAX_DEPTH + 1), "nested too deeply"),
    ],
)
def test_it_leaves_to_the_standard_reader_what_orjson_reads_otherwise(text, why):
    assert json_loads_fast(text.encode()) is None, why


def test_it_leaves_invalid_utf8_to_the_standard_reader():
    assert json_loads_fast(b'{"a": "\xed\xa0\x80"}') is None
    assert json_loads_fast(b'{"a": "\xff"}') is None


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
)
_keys = st.sampled_from(["a", "b", 'q"', "\\", 'x\\"', "é", "case_id"])
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(obj=st.dictionaries(_keys, _values, max_size=6), dup=st.booleans(), ascii=st.booleans())
def test_it_answers_as_the_standard_reader_or_not_at_all(obj, dup, ascii):
    text = json.dumps(obj, ensure_ascii=ascii)
    if dup and obj:  # the first key again, as the last (json.dumps cannot write a duplicate)
        key = next(iter(obj))
        text = text[:-1] + ", " + json.dumps(key) + ": 0}"
    fast = json_loads_fast(text.encode("utf-8", "surrogatepass"))
    if dup and obj:
        assert fast is None
    elif fast is not None:
        assert same(fast, json_loads_line(text))
