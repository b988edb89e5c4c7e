"""Filtering by case tag in the database, on SQLite and PostgreSQL alike.

A tag matches a whole element of ``Case.tags`` exactly (``reg`` is not ``regression``; no
LIKE, so ``%`` and ``_`` are plain). SQLite: ``json_each`` in an ``EXISTS``; PostgreSQL:
jsonb containment ``@>`` (a GIN index would serve it). The tag is always a bound parameter."""

from __future__ import annotations

import json

from django.db import NotSupportedError
from django.db.models import F, Lookup, QuerySet, Value
from django.db.models.fields import CharField


class HasTag(Lookup):
    """``<JSON list column> holds the string <rhs>`` as a boolean expression; used directly
    in ``filter()`` (``has_tag``), so it needs no registration on a field."""

    lookup_name = "has_tag"
    prepare_rhs = False

    def as_sqlite(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = compiler.compile(self.rhs)
        # json_type: a bare JSON string is not a list of tags (as jsonb containment says).
        sql = (
            f"(json_type({lhs}) = 'array' AND EXISTS (SELECT 1 FROM json_each({lhs}) AS "
            f"tag WHERE tag.value = {rhs}))"
        )
        return sql, (*lhs_params, *lhs_params, *rhs_params)

    def as_postgresql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} @> %s::jsonb", (*lhs_params, json.dumps([self.rhs.value]))

    def as_sql(self, compiler, connection):
        raise NotSupportedError(
            f"tag filters support SQLite and PostgreSQL, not {connection.vendor}"
        )


def has_tag(field: str, tag: str) -> HasTag:
    """The filter expression "the JSON list at ``field`` holds ``tag``": ``field`` is a
    lookup path to a tags column (``"tags"`` on cases, ``"case__tags"`` on trials)."""
    if not isinstance(tag, str):
        raise TypeError(f"tag must be a string, got {type(tag).__name__}")
    return HasTag(F(field), Value(tag, output_field=CharField()))


def cases_tagged(qs: QuerySet, tag: str) -> QuerySet:
    """``qs`` (cases) narrowed to the cases whose tags hold ``tag`` exactly."""
    return qs.filter(has_tag("tags", tag))


def trials_tagged(qs: QuerySet, tag: str) -> QuerySet:
    """``qs`` (trials) narrowed to the trials whose case's tags hold ``tag`` exactly."""
    return qs.filter(has_tag("case__tags", tag))
