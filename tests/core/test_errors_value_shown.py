"""Error messages show a refused value as the input wrote it (JSON), cut, and always printable."""

from __future__ import annotations

import pytest

from core.errors import DomainError, value_shown
from evals.runner.targets.simulated import SimulatedConfig
from labeling.labels import verdict_check


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ("false", '"false"'),
        (1.5, "1.5"),
        ([1, "a"], '[1, "a"]'),
        ({"k": None}, '{"k": null}'),
        ("\ud800x\x00", '"\\ud800x\\u0000"'),
        ("<b>é</b>", '"<b>é</b>"'),
    ],
)
def test_a_value_is_shown_as_json_text(value, shown):
    assert value_shown(value) == shown


def test_a_long_value_is_cut_to_the_limit_and_marked():
    shown = value_shown("x" * 10_000, limit=40)
    assert len(shown) == 40
    assert shown.endswith("…")
    assert shown.startswith('"xxx')


def test_what_json_cannot_say_falls_back_to_repr_and_the_text_encodes():
    assert value_shown(b"\xff") == "b'\\xff'"
    value_shown("\udcff" * 3).encode("utf-8")  # no UnicodeEncodeError: the surrogate is escaped


@pytest.mark.parametrize(("verdict", "says"), [(True, "got true"), ("Pass", 'got "Pass"')])
def test_a_refused_verdict_is_named_as_the_request_wrote_it(verdict, says):
    with pytest.raises(DomainError) as refused:
        verdict_check(verdict)
    assert refused.value.field == "verdict"
    assert str(refused.value).endswith(says)


@pytest.mark.parametrize(
    ("seed", "says"),
    [
        (None, "required: a whole number from 0 to 9,223,372,036,854,775,807"),
        ("7", 'expected a whole number from 0 to 9,223,372,036,854,775,807, got "7"'),
        (True, "expected a whole number from 0 to 9,223,372,036,854,775,807, got true"),
    ],
)
def test_a_simulated_target_names_a_missing_or_mistyped_seed(seed, says):
    config = {"kind": "simulated", "model": "simulated", "seed": seed}
    with pytest.raises(DomainError) as refused:
        SimulatedConfig.parse(config)
    assert refused.value.field == "target.seed"
    assert refused.value.message.startswith(says)
