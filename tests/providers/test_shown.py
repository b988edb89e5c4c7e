"""providers.shown: a config value quoted by an error message, never a key."""

from __future__ import annotations

from providers.shown import KEY_NOT_SHOWN, value_shown


def test_it_quotes_a_value_cut_to_its_length_but_never_a_key():
    assert value_shown("2024-10-21", 40) == '"2024-10-21"'  # as the JSON or TOML wrote it
    assert value_shown("x" * 50, 10) == '"xxxxxxxx…'
    assert value_shown(True, 40) == "true"
    assert value_shown(3, 40) == "3"
    assert value_shown("sk-proj-abcdefghijklmnopqrstuvwxyz123456", 40) == KEY_NOT_SHOWN
    assert value_shown(" gsk_abc", 40) == KEY_NOT_SHOWN
