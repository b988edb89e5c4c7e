"""DRF fields' ``to_representation`` as plain callables for lists of ``values()`` rows: the
same output without DRF's per-value lookups. Each converter takes a non-null value; an
unexpected type goes to the field itself, and only the exact classes below are sped up
(a subclass may represent differently)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from decimal import Decimal
from typing import Any

from rest_framework import ISO_8601, serializers
from rest_framework.settings import api_settings

Converter = Callable[[Any], Any]


def field_converter(field: serializers.Field[Any, Any, Any, Any]) -> Converter:
    """A callable equal to ``field.to_representation`` on non-null values. Build it per request:
    a date-time converter holds the time zone active when built."""
    if type(field) is serializers.UUIDField and field.uuid_format == "hex_verbose":
        return str  # DRF: ``str(value)`` for this format, whatever the value
    if type(field) is serializers.IntegerField:
        return _exact(int, int, field)
    if type(field) is serializers.FloatField:
        return _exact(float, float, field)
    if type(field) is serializers.CharField:
        return _exact(str, str, field)
    if type(field) is serializers.ChoiceField:
        return _choice(field)
    if type(field) is serializers.DecimalField:
        return _decimal(field)
    if type(field) is serializers.DateTimeField:
        return _datetime(field)
    return field.to_representation


def _exact(
    python_type: type, convert: Converter, field: serializers.Field[Any, Any, Any, Any]
) -> Converter:
    slow = field.to_representation

    def represent(value: Any) -> Any:
        # int(True) is 1, str of a str subclass differs in type: exact types only.
        return convert(value) if type(value) is python_type else slow(value)

    return represent


def _choice(field: serializers.ChoiceField) -> Converter:
    lookup = field.choice_strings_to_values.get
    slow = field.to_representation

    def represent(value: Any) -> Any:
        if type(value) is str and value:
            return lookup(value, value)
        return slow(value)

    return represent


def _decimal(field: serializers.DecimalField) -> Converter:
    """Decimals already at the field's places print as they are (DRF's quantize keeps them)."""
    slow = field.to_representation
    coerce = getattr(field, "coerce_to_string", api_settings.COERCE_DECIMAL_TO_STRING)
    if not coerce or field.localize or field.normalize_output or field.decimal_places is None:
        return slow
    exponent = -field.decimal_places
    max_digits = field.max_digits

    def represent(value: Any) -> Any:
        if type(value) is not Decimal or not value.is_finite():
            return slow(value)
        sign, digits, exp = value.as_tuple()
        if exp != exponent or (max_digits is not None and len(digits) > max_digits):
            return slow(value)
        return f"{value:f}"

    return represent


def _datetime(field: serializers.DateTimeField) -> Converter:
    slow = field.to_representation
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    if output_format is None or output_format.lower() != ISO_8601:
        return slow
    zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    # None without USE_TZ (the stubs type default_timezone() as str | None; it is a tzinfo).
    if not isinstance(zone, tzinfo):
        return slow

    def represent(value: Any) -> Any:
        if type(value) is not datetime or value.utcoffset() is None:
            return slow(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return slow(value)  # DRF's own error for it
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return represent
