"""core.api.rows: each converter returns what its DRF field's ``to_representation`` does, for
the values a database row holds and for the odd ones it hands back to the field."""

import datetime as dt
import uuid
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from core.api.rows import field_converter

DECIMAL = serializers.DecimalField(max_digits=14, decimal_places=8)
DATETIME = serializers.DateTimeField()
CHOICE = serializers.ChoiceField(choices=[("ok", "OK"), ("error", "Error")])
BOUNDED = settings(max_examples=200, deadline=None, derandomize=True)


def _both(field, value) -> tuple:
    """(ours, DRF's) representation of ``value`` by ``field``, each with its type."""
    ours, drfs = field_converter(field)(value), field.to_representation(value)
    return (ours, type(ours)), (drfs, type(drfs))


@BOUNDED
@given(
    st.decimals(
        min_value=Decimal("-999999.99999999"),
        max_value=Decimal("999999.99999999"),
        places=8,
        allow_nan=False,
        allow_infinity=False,
    )
)
def test_a_decimal_at_the_field_s_places_prints_as_drf_prints_it(value):
    ours, drfs = _both(DECIMAL, value)
    assert ours == drfs


@pytest.mark.parametrize(
    "value",
    [
        Decimal("1.5"),  # fewer places: DRF pads, and so does the field it is handed to
        Decimal("0E-8"),
        Decimal("-0E-8"),
        Decimal("1.123456789"),  # more places: rounded by DRF
        Decimal("12345678901234E-8"),
        1.25,  # not a Decimal
    ],
)
def test_an_odd_decimal_goes_to_the_field_and_reads_the_same(value):
    ours, drfs = _both(DECIMAL, value)
    assert ours == drfs


@BOUNDED
@given(
    st.datetimes(
        # hypothesis takes naive bounds and adds the zones itself
        min_value=dt.datetime(1970, 1, 2),  # noqa: DTZ001
        max_value=dt.datetime(2200, 1, 1),  # noqa: DTZ001
        timezones=st.sampled_from([dt.UTC, ZoneInfo("Europe/Paris"), ZoneInfo("Asia/Kolkata")]),
    ),
    st.sampled_from(["UTC", "Europe/Paris", "America/St_Johns", "Pacific/Chatham"]),
)
def test_a_date_time_reads_as_drf_reads_it_in_the_viewer_s_zone(value, zone):
    with timezone.override(ZoneInfo(zone)):
        ours, drfs = _both(serializers.DateTimeField(), value)
        assert ours == drfs


def test_a_naive_date_time_goes_to_the_field():
    ours, drfs = _both(DATETIME, dt.datetime(2026, 12, 2, 6, 0))  # noqa: DTZ001 (naive on purpose)
    assert ours == drfs


def test_a_date_time_converter_keeps_the_zone_it_was_built_in():
    value = dt.datetime(2026, 12, 2, 6, 30, 15, 123456, tzinfo=dt.UTC)
    with timezone.override(ZoneInfo("Europe/Paris")):
        convert = field_converter(DATETIME)
    assert convert(value) == "2026-12-02T07:30:15.123456+01:00"
    with timezone.override(dt.UTC):
        assert field_converter(DATETIME)(value) == "2026-12-02T06:30:15.123456Z"


@pytest.mark.parametrize("value", ["ok", "error", "unknown", ""])
def test_a_choice_reads_as_drf_reads_it(value):
    ours, drfs = _both(CHOICE, value)
    assert ours == drfs


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (serializers.UUIDField(), uuid.UUID("12345678-1234-5678-1234-567812345678")),
        (serializers.UUIDField(format="hex"), uuid.UUID("12345678-1234-5678-1234-567812345678")),
        (serializers.IntegerField(), 7),
        (serializers.IntegerField(), True),  # bool is an int subclass: the field decides
        (serializers.FloatField(), 12.5),
        (serializers.FloatField(), 3),
        (serializers.CharField(), "<b>boom</b>"),
        (serializers.CharField(), 5),
        (serializers.BigIntegerField(coerce_to_string=True), 9),  # a subclass: its own rule
    ],
)
def test_the_other_fields_read_as_drf_reads_them(field, value):
    ours, drfs = _both(field, value)
    assert ours == drfs
