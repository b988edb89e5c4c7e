"""core.db._json_copy_text: the JSON text COPY writes into jsonb columns comes from orjson
when the field has no encoder of its own; it holds the values ``_json_dumper``'s text holds,
and whatever orjson refuses or would write differently goes to ``_json_dumper`` (written or
refused as before). Issue 17."""

import datetime
import enum
import json
import uuid
from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from core.db import _json_copy_text, _json_dumper, values_insert
from evals.models import Case, Suite
from tests.core.test_db import VALUES

PLAIN = models.JSONField()


class Color(enum.StrEnum):
    RED = "red"


@dataclass
class Point:
    x: int


@pytest.mark.parametrize("value", VALUES + [{"m": None}, [True, False], {"é": "\u2028"}])
def test_the_text_holds_the_values_the_encoders_text_holds(value):
    text = _json_copy_text(PLAIN)(value)
    exact = _json_dumper(PLAIN)(value)
    assert json.loads(text) == json.loads(exact)  # a key 3 reads "3" either way
    assert json.loads(text, parse_float=Decimal) == json.loads(exact, parse_float=Decimal)


def test_orjson_writes_the_plain_values_and_the_rest_is_the_encoders_own_text():
    dumps = _json_copy_text(PLAIN)
    exact = _json_dumper(PLAIN)
    assert dumps({"a": [1, 2.5, True], "b": "é"}) == '{"a":[1,2.5,true],"b":"é"}'  # orjson's
    assert dumps(None) is None  # SQL NULL
    # What orjson refuses or would write its own way: the encoder's text, exactly.
    for value in [{"big": 2**70}, {3: "int key"}, {"m": None}, Color.RED, [Color.RED]]:
        assert dumps(value) == exact(value)
    assert dumps({"big": 2**70}) == '{"big": 1180591620717411303424}'
    assert dumps({3: "int key"}) == '{"3": "int key"}'
    assert dumps({"m": None}) == '{"m": null}'
    assert dumps(Color.RED) == '"red"'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_number_is_refused_not_written_as_null(bad):
    dumps = _json_copy_text(PLAIN)
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps({"score": bad})
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps([1, [bad]])


@pytest.mark.parametrize(
    "value",
    [
        {"when": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)},
        {"day": datetime.date(2026, 1, 2)},
        {"point": Point(1)},
        {"amount": Decimal("1.5")},
        {"raw": b"x"},
        {"what": object()},
    ],
)
def test_a_type_the_plain_encoder_refuses_is_still_refused(value):
    with pytest.raises(TypeError):
        _json_copy_text(PLAIN)(value)


def test_a_circular_or_very_deep_value_goes_to_the_encoder():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        _json_copy_text(PLAIN)(loop)
    deep: list = []
    for _ in range(300):  # orjson stops at 255 levels; the encoder writes it
        deep = [deep]
    assert _json_copy_text(PLAIN)(deep) == _json_dumper(PLAIN)(deep)


def test_a_field_with_its_own_encoder_is_written_by_it():
    field = models.JSONField(encoder=DjangoJSONEncoder)
    value = {"when": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC), "id": uuid.UUID(int=7)}
    assert _json_copy_text(field)(value) == _json_dumper(field)(value)
    assert _json_copy_text(field)(value) == (
        '{"when": "2026-01-02T00:00:00Z", "id": "00000000-0000-0000-0000-000000000007"}'
    )


@pytest.mark.django_db
def test_values_insert_stores_the_values_given():
    """On PostgreSQL through COPY and orjson's text; on SQLite through Django's own."""
    suite = Suite.objects.create(name="s")
    when = datetime.datetime(2026, 3, 4, tzinfo=datetime.UTC)
    expected = [
        {"a": [1, 2.5, None, True, {"b": "é\u2028"}], "z": -0.0},
        {"big": 2**70, "tiny": 1e-7, "huge": 1e16},
        "plain",
        [[]],
        {},
    ]
    values_insert(
        Case,
        ("key", "uuid", "created_at", "expected", "suite_id", "input", "content_hash"),
        [
            (f"k{i}", uuid.UUID(int=i + 1), when, value, suite.id, "q", "h" * 64)
            for i, value in enumerate(expected)
        ],
    )
    got = dict(Case.objects.filter(suite=suite).values_list("key", "expected"))
    assert [got[f"k{i}"] for i in range(len(expected))] == expected
    assert type(got["k1"]["big"]) is int and got["k1"]["tiny"] == 1e-7
