"""Rows straight from the cursor, and rows written without model instances (COPY on
PostgreSQL, one ``executemany`` elsewhere)."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterator, Sequence, Sized
from datetime import datetime
from functools import partial

# typeshed leaves out json.encoder.c_make_encoder (the C encoder, or None without it).
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _encode_unicode
from json.encoder import encode_basestring_ascii as _encode_ascii
from typing import Any, TypeVar

import orjson
from django.db import connections, models, router


def sql_marks(values: Sized) -> str:
    """``%s, %s, ...``: one placeholder per value."""
    return ", ".join(["%s"] * len(values))


def raw_rows(queryset: models.QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """Rows of a ``values_list`` queryset without Django's per-row converters. Only for columns
    whose raw value is what the caller needs: ints, floats, text (no bools, dates, JSON)."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


_F = TypeVar("_F", bound="models.Field[Any, Any]")


def model_field(model: type[models.Model], name: str, kind: type[_F]) -> _F:
    """``model._meta.get_field(name)`` (a field name or attname), checked to be a ``kind``
    (``models.Field``: a field of the model itself, with its ``column``, not the reverse
    side of a relation). Raises ``TypeError`` when it is not; ``FieldDoesNotExist`` as
    ``get_field`` does."""
    field = model._meta.get_field(name)
    if not isinstance(field, kind):
        raise TypeError(f"{model.__name__}.{name} is not a {kind.__name__}")
    return field


# Fields whose Python values need the database's own form (UUID text, naive-UTC text on
# SQLite, Jsonb, Decimal); every other value goes to the driver as it is.
_CONVERTED = (models.UUIDField, models.DateTimeField, models.JSONField, models.DecimalField)


def _json_dumper(f: models.JSONField) -> Callable[[Any], str | None]:
    """JSON text for COPY (None stays NULL), the field's encoder built once per ``rows_insert``
    call (``allow_nan=False``: NaN raises ``ValueError``). An encoder overriding
    ``encode``/``iterencode`` is called as it is."""
    encoder = (f.encoder or json.JSONEncoder)(allow_nan=False)
    encode = encoder.encode
    cls = type(encoder)
    if (
        _c_make_encoder is not None
        and cls.encode is json.JSONEncoder.encode
        and cls.iterencode is json.JSONEncoder.iterencode
        and encoder.indent is None
    ):
        one_shot = _c_make_encoder(
            {} if encoder.check_circular else None,
            encoder.default,
            _encode_ascii if encoder.ensure_ascii else _encode_unicode,
            None,
            encoder.key_separator,
            encoder.item_separator,
            encoder.sort_keys,
            encoder.skipkeys,
            encoder.allow_nan,
        )

        def encode(value: Any) -> str:
            if isinstance(value, str):
                return _encode_ascii(value) if encoder.ensure_ascii else _encode_unicode(value)
            return "".join(one_shot(value, 0))

    def dumps(value: Any) -> str | None:
        if value is None:
            return None
        kind = type(value)
        if (kind is dict or kind is list) and not value:
            return "{}" if kind is dict else "[]"
        return encode(value)

    return dumps


# Types orjson would write its own way (dates, dataclasses, subclasses of str, int, dict,
# list) go to ``_refuse``: the field's encoder writes or refuses them.
_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _refuse(value: Any) -> Any:
    raise TypeError(f"not written by orjson: {type(value).__name__}")


def _json_copy_text(f: models.JSONField) -> Callable[[Any], str | None]:
    """JSON text for a ``jsonb`` COPY: orjson (about twice as fast) when the field has no encoder
    of its own; what it refuses, and text holding ``null`` (its NaN), goes to ``_json_dumper``."""
    exact = _json_dumper(f)
    if f.encoder is not None and f.encoder is not json.JSONEncoder:
        return exact
    fast = orjson.dumps

    def dumps(value: Any) -> str | None:
        if value is None:
            return None
        try:
            text = fast(value, default=_refuse, option=_ORJSON_OPTIONS)
        except orjson.JSONEncodeError:
            return exact(value)
        if b"null" in text:  # a NaN or an Infinity would read null: the encoder decides
            return exact(value)
        return text.decode()

    return dumps


def _stamp_texts() -> Callable[[Any], Any]:
    """Datetimes as ISO 8601 text for COPY, memoised by value (a bulk write stamps thousands of
    rows with one or two instants; bench/README.md, *Bulk ingest*). Other values pass through."""
    memo: dict[datetime, str] = {}

    def convert(value: Any) -> Any:
        if type(value) is not datetime:
            return value
        text = memo.get(value)
        if text is None:
            text = memo[value] = value.isoformat()
        return text

    return convert


def rows_insert(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (attname -> value) without model instances, in the caller's transaction:
    COPY on PostgreSQL, ``executemany`` elsewhere. Defaults are evaluated once per call (pass a
    UUID explicitly). Raises ``IntegrityError``; sends no signals."""
    if not rows:
        return
    names = [f.attname for f in model._meta.concrete_fields if not f.primary_key]
    defaults = {f.attname: f.get_default() for f in model._meta.concrete_fields}
    pick = operator.itemgetter(*names)
    values_insert(model, names, [pick({**defaults, **row}) for row in rows])


def values_insert(
    model: type[models.Model], names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """``rows_insert`` for rows as value sequences in the order of ``names`` (concrete attnames,
    no primary key). Raises ``ValueError`` for a name that is not such a field."""
    if not rows:
        return
    connection = connections[router.db_for_write(model)]
    by_name = {f.attname: f for f in model._meta.concrete_fields if not f.primary_key}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f"values_insert: not a field of {model.__name__}: {unknown}")
    rest = [f for name, f in by_name.items() if name not in names]
    fields = [by_name[name] for name in names] + rest
    copy = connection.vendor == "postgresql"
    converters: list[tuple[int, Callable[[Any], Any]]] = []
    stamp_text = _stamp_texts()  # one memo per call: shared by every date-time column
    for i, f in enumerate(fields):
        if copy and isinstance(f, models.JSONField):
            converters.append((i, _json_copy_text(f)))  # COPY text takes JSON text for jsonb
        elif copy and type(f) is models.DateTimeField:
            converters.append((i, stamp_text))
        elif isinstance(f, _CONVERTED) and not copy:
            converters.append((i, partial(f.get_db_prep_save, connection=connection)))
        # else: psycopg adapts UUID, aware datetime and Decimal values natively
    # Defaults of the fields not named, converted once.
    tail = [f.get_default() for f in rest]
    for i, convert in converters:
        if i >= len(names):
            tail[i - len(names)] = convert(tail[i - len(names)])
    converters = [(i, convert) for i, convert in converters if i < len(names)]
    tail_tuple = tuple(tail)

    def prepared() -> Iterator[Sequence[Any]]:
        for row in rows:
            if converters:
                value = list(row)
                for i, convert in converters:
                    value[i] = convert(value[i])
                row = value
            yield (*row, *tail_tuple) if tail_tuple else row

    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(f.column) for f in fields)
    with connection.cursor() as cursor, connection.wrap_database_errors:
        if copy:
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as out:
                write = out.write_row
                for row in prepared():
                    write(row)
        else:
            marks = sql_marks(fields)
            # A list: the debug cursor (DEBUG, assertNumQueries) takes its len().
            cursor.executemany(
                f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(prepared())
            )
