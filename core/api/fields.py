"""Strict API input: fields that refuse the wrong JSON type where DRF's coerce ("1" -> 1), and
the UUID query parameter readers."""

from __future__ import annotations

import math
import uuid
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from rest_framework import serializers

from core import bounds
from core.errors import DomainError
from core.ids import uuid_parse

if TYPE_CHECKING:
    from rest_framework.request import Request

    _Serializer = serializers.Serializer[Any]
else:
    _Serializer = object


class StrictUUIDField(serializers.UUIDField):
    """A UUID given as a JSON string (an integer is refused, not read as UUID(int=...))."""

    def to_internal_value(self, data: Any) -> uuid.UUID:
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A JSON string (numbers and booleans are refused, not turned into text)."""

    default_error_messages = {"invalid": "Expected a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer ("1", 1.0, true refused), within the database's integer range unless the
    field sets its own bounds."""

    default_error_messages = {"invalid": "Expected an integer."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", bounds.INT_MAX)
        kwargs.setdefault("min_value", bounds.INT_MIN)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite JSON number; a string ("0.05"), a boolean or null is refused."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        if not math.isfinite(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean; ``"false"``, ``0`` or ``"1"`` is refused (never coerced)."""

    default_error_messages = {"invalid": "Must be a JSON boolean (true or false)."}

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid")


class StrictChoiceField(serializers.ChoiceField):
    """One of the choices, exactly as written ("PASS" and true are not "pass")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or data not in self.choices:
            self.fail("invalid_choice", input=data)
        return data


def query_uuid(request: Request, name: str) -> uuid.UUID | None:
    """``?<name>=`` as a UUID; None when absent or empty; a 400 naming it when malformed."""
    value = request.query_params.get(name)
    if not value:
        return None
    parsed = uuid_parse(value)
    if parsed is None:
        raise serializers.ValidationError({name: [f"{value[:100]!r} is not a UUID"]})
    return parsed


def query_uuid_known(
    request: Request, name: str, queryset: QuerySet[Any], noun: str = ""
) -> uuid.UUID | None:
    """``query_uuid`` naming a row of ``queryset``; a UUID naming none raises ``DomainError``
    (``not_found``, 404) on ``name``, as ``core.http.query_object`` does."""
    value = query_uuid(request, name)
    if value is not None and not queryset.filter(uuid=value).exists():
        raise DomainError(f"no {noun or name} with id {value}", field=name, code="not_found")
    return value


def query_uuid_required(request: Request, name: str) -> uuid.UUID:
    """``?<name>=`` as a UUID (``query_uuid``); a 400 naming ``name`` when it is missing."""
    value = query_uuid(request, name)
    if value is None:
        raise serializers.ValidationError({name: ["required: a run UUID"]})
    return value


class NoUnknownFields(_Serializer):
    """Input serializers refuse keys they do not define (a typo is a 400, never ignored)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({k: ["unknown field"] for k in unknown})
        return super().to_internal_value(data)
