"""core.text.unstorable_replace: the JSON-text check that lets a clean reply skip the walk
gives what the walk gives, on every kind of value."""

from __future__ import annotations

import decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from core.text import REPLACEMENT, _replace_walk, unstorable_replace

# Characters that matter: NUL, both surrogate ranges, and what the JSON text of a clean
# string may hold around them (a backslash and "u0000" spelt out, quotes, control
# characters the encoder escapes, an astral character).
ALPHABET = st.sampled_from(
    ["a", "\x00", "\ud800", "\udfff", "\\", "u", "0", '"', "\n", "\x1f", "😀", "\ufffd"]
)
TEXT = st.text(alphabet=ALPHABET, max_size=8)
SCALAR = st.one_of(
    TEXT, st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(), st.binary()
)
VALUE = st.recursive(
    SCALAR,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.one_of(TEXT, st.integers()), children, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(VALUE)
def test_it_gives_what_the_walk_gives_and_a_clean_value_back_as_itself(value):
    clean, count = unstorable_replace(value)
    walked, walked_count = _replace_walk(value)
    assert count == walked_count
    assert repr(clean) == repr(walked)  # repr: NaN != NaN, and lists against tuples
    if count == 0:
        assert clean is value


def test_the_text_backslash_u0000_is_kept_and_a_real_nul_in_a_key_is_replaced():
    spelt = {"note": "a \\u0000 b"}
    assert unstorable_replace(spelt) == (spelt, 0)
    assert unstorable_replace(spelt)[0] is spelt
    assert unstorable_replace({"k\x00": ["x"]}) == ({f"k{REPLACEMENT}": ["x"]}, 1)


def test_a_lone_surrogate_deep_in_a_tuple_is_found_and_a_value_json_cannot_write_is_walked():
    value = {"a": [1, ("ok", {"b": "x\udc00y"})], "n": decimal.Decimal("1.5")}
    clean, count = unstorable_replace(value)
    assert count == 1
    assert clean == {"a": [1, ["ok", {"b": f"x{REPLACEMENT}y"}]], "n": decimal.Decimal("1.5")}
