"""core.db: JSON text for COPY is the encoder's own text, and rows_insert writes JSON, UUID,
decimal and time values that read back as given (SQLite and PostgreSQL)."""

import datetime
import json
import uuid
from decimal import Decimal

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from core.db import _json_dumper, rows_insert, values_insert
from evals.models import Case, Suite

VALUES = [
    "plain",
    'quote " and é and \u2028',
    {"a": [1, 2.5, None, True, {"b": "é"}], 3: "int key", "z": -0.0},
    {"nested": {"deep": [[], {}, [[1]]]}},
    [],
    {},
    [[]],
    1.0,
    1e16,
    10**30,
    "",
    {"z": 1, "a": 2},
]


@pytest.mark.parametrize("encoder", [None, DjangoJSONEncoder])
def test_the_json_text_is_what_the_fields_encoder_writes(encoder):
    dumps = _json_dumper(models.JSONField(encoder=encoder))
    reference = (encoder or json.JSONEncoder)(allow_nan=False).encode
    values = list(VALUES)
    if encoder is not None:
        values += [
            Decimal("1.50"),
            uuid.UUID(int=7),
            datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
        ]
    for value in values:
        assert dumps(value) == reference(value)
    assert dumps(None) is None  # SQL NULL, not the JSON text null


def test_a_non_finite_number_or_an_unknown_type_is_refused_not_written():
    dumps = _json_dumper(models.JSONField())
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps({"score": float("nan")})
    with pytest.raises(TypeError):
        dumps({"when": object()})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)
    assert dumps({"after": [1]}) == '{"after": [1]}'


def test_an_encoder_that_overrides_encode_is_used_as_it_is():
    class Upper(json.JSONEncoder):
        def encode(self, o):
            return super().encode(o).upper()

    assert _json_dumper(models.JSONField(encoder=Upper))({"a": "b"}) == '{"A": "B"}'


@pytest.mark.django_db
def test_rows_insert_writes_rows_that_read_back_as_given():
    suite = Suite.objects.create(name="s")
    when = datetime.datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=datetime.UTC)
    rows = [
        {
            "uuid": uuid.UUID(int=i + 1),
            "suite_id": suite.id,
            "key": f"k{i}",
            "input": {"q": f"question {i}", "n": [i, 1.5, None]},
            "expected": None if i else "é",
            "context": [],
            "tags": ["a", "b"] if i else [],
            "goal_state": None,
            "content_hash": "h" * 64,
            "created_at": when,
        }
        for i in range(3)
    ]
    rows_insert(Case, rows)
    got = {c.key: c for c in Case.objects.filter(suite=suite)}
    assert sorted(got) == ["k0", "k1", "k2"]
    assert got["k1"].input == {"q": "question 1", "n": [1, 1.5, None]}
    assert got["k0"].expected == "é"
    assert got["k1"].expected is None
    assert got["k2"].tags == ["a", "b"]
    assert got["k0"].context == []
    assert got["k2"].uuid == uuid.UUID(int=3)
    assert got["k0"].created_at == when
    assert got["k0"].retired_at is None


@pytest.mark.django_db
def test_rows_insert_takes_rows_that_give_different_fields():
    suite = Suite.objects.create(name="s")
    base = {"suite_id": suite.id, "input": "q", "content_hash": "h" * 64}
    when = datetime.datetime(2026, 3, 4, tzinfo=datetime.UTC)
    rows_insert(
        Case,
        [
            {**base, "uuid": uuid.UUID(int=1), "key": "a", "created_at": when},
            # one more field than the first row: it is written, not dropped
            {**base, "uuid": uuid.UUID(int=2), "key": "b", "created_at": when, "tags": ["x"]},
            # one field fewer: the default (an empty list) fills it
            {
                "suite_id": suite.id,
                "input": "q",
                "content_hash": "h" * 64,
                "key": "c",
                "uuid": uuid.UUID(int=3),
                "created_at": when,
                "expected": "e",
            },
            # the same number of fields as the first row, but not the same ones
            {
                "suite_id": suite.id,
                "input": "q",
                "uuid": uuid.UUID(int=4),
                "key": "d",
                "created_at": when,
                "expected": "z",
            },
        ],
    )
    got = {c.key: c for c in Case.objects.filter(suite=suite)}
    assert got["a"].tags == [] and got["a"].expected is None
    assert got["b"].tags == ["x"]
    assert got["c"].tags == [] and got["c"].expected == "e"
    assert got["d"].expected == "z" and got["d"].content_hash == ""


@pytest.mark.django_db
def test_values_insert_writes_tuples_in_the_named_order_and_defaults_the_rest():
    suite = Suite.objects.create(name="s")
    when = datetime.datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=datetime.UTC)
    # Not the model's order; "context", "tags", "goal_state" and "retired_at" are not named.
    names = ("key", "uuid", "created_at", "expected", "suite_id", "input", "content_hash")
    values_insert(
        Case,
        names,
        [
            ("k0", uuid.UUID(int=1), when, {"a": [1, 2.5]}, suite.id, "q0", "h" * 64),
            ("k1", uuid.UUID(int=2), when, None, suite.id, {"q": "é"}, "h" * 64),
        ],
    )
    got = {c.key: c for c in Case.objects.filter(suite=suite)}
    assert sorted(got) == ["k0", "k1"]
    assert got["k0"].uuid == uuid.UUID(int=1)
    assert got["k0"].expected == {"a": [1, 2.5]}
    assert got["k1"].expected is None
    assert got["k1"].input == {"q": "é"}
    assert got["k0"].created_at == when
    assert (got["k0"].context, got["k0"].tags, got["k0"].goal_state) == ([], [], None)
    assert got["k1"].retired_at is None


@pytest.mark.django_db
def test_values_insert_refuses_a_name_that_is_not_a_field(django_assert_num_queries):
    with pytest.raises(ValueError, match="not a field of Case: \\['nope'\\]"):
        values_insert(Case, ("key", "nope"), [("k", 1)])
    with django_assert_num_queries(0):
        values_insert(Case, ("key",), [])  # nothing to write: no query


@pytest.mark.django_db
def test_values_insert_writes_every_instant_as_given_when_rows_share_them():
    """Date-times go to COPY as memoised ISO text on PostgreSQL: one instant given in two
    zones, instants a microsecond apart, a repeated instant and a null all read back as
    the instants given (SQLite: Django's own conversion)."""
    suite = Suite.objects.create(name="s")
    utc = datetime.datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=datetime.UTC)
    east = utc.astimezone(datetime.timezone(datetime.timedelta(hours=5, minutes=30)))
    later = utc + datetime.timedelta(microseconds=1)
    old = datetime.datetime(1900, 1, 1, tzinfo=datetime.UTC)
    stamps = [utc, east, later, utc, old, later]
    values_insert(
        Case,
        ("key", "uuid", "created_at", "retired_at", "suite_id", "input", "content_hash"),
        [
            (f"k{i}", uuid.UUID(int=i + 1), when, None if i % 2 else when, suite.id, "q", "h" * 64)
            for i, when in enumerate(stamps)
        ],
    )
    got = {c.key: c for c in Case.objects.filter(suite=suite)}
    for i, when in enumerate(stamps):
        assert got[f"k{i}"].created_at == when
        assert got[f"k{i}"].retired_at == (None if i % 2 else when)
    assert got["k2"].created_at - got["k0"].created_at == datetime.timedelta(microseconds=1)
