"""A run's queued trials, written in one ``INSERT ... SELECT`` statement: the database builds
the rows from the case ids and attempt numbers, each with a random UUID, and returns their
ids (building 10,000 model instances cost about a second of CPU).

Every concrete column of ``Trial`` is written: run, case, attempt, UUID and ``created_at``
as given, every other column its field's default or NULL, as the ORM would. A unique,
non-nullable field would need a value per row: ``queued_trials_insert`` refuses to run then."""

from __future__ import annotations

import json

from django.db import connections, models, router
from django.utils import timezone

from core.db import model_field
from evals.models import Trial

# Columns given per row in the statement itself; every other one takes its field's default.
_PER_ROW = frozenset({"uuid", "run_id", "case_id", "attempt", "created_at"})

# A random version-4 UUID as SQLite stores a UUIDField (32 hex digits, no dashes), from the
# random 32 hex digits ``h``: the version nibble is 4, the variant nibble one of 8, 9, a, b
# (RFC 9562, section 5.4).
_SQLITE_UUID4 = (
    "substr(h, 1, 12) || '4' || substr(h, 14, 3) "
    "|| substr('89ab', 1 + (abs(random()) %% 4), 1) || substr(h, 18, 15)"
)


def queued_trials_insert(*, run_id: int, case_ids: list[int], trials_per_case: int) -> list[int]:
    """Insert trials 1..``trials_per_case`` of each of ``case_ids`` for run ``run_id``, queued, in
    the caller's transaction; returns their ids by (case id, attempt). PostgreSQL 13+:
    ``unnest`` × ``generate_series``, ``gen_random_uuid()``; SQLite 3.35+: ``json_each`` × a
    recursive count, UUIDs from ``randomblob``. An existing (run, case, attempt) or an unknown
    case raises ``IntegrityError``; ``ValueError`` for ``trials_per_case < 1``;
    ``RuntimeError`` when ``Trial`` gained a unique non-nullable column."""
    if trials_per_case < 1:
        raise ValueError(f"trials_per_case must be at least 1, got {trials_per_case}")
    if not case_ids:
        return []
    connection = connections[router.db_for_write(Trial)]
    quote = connection.ops.quote_name
    columns, values, params = [], [], []
    for f in Trial._meta.concrete_fields:
        if f.primary_key or f.attname in _PER_ROW:
            continue
        if f.null and not f.has_default():
            continue  # NULL: the column's value in a row the ORM would have saved
        if f.unique:
            raise RuntimeError(f"Trial.{f.name} is unique: it needs a value per row here")
        columns.append(quote(f.column))
        values.append("%s")
        params.append(f.get_db_prep_save(f.get_default(), connection=connection))
    created_at = Trial._meta.get_field("created_at")
    now = created_at.get_db_prep_save(timezone.now(), connection=connection)
    per_row = ["uuid", "run_id", "case_id", "attempt", "created_at"]
    names = ", ".join(
        [*(quote(model_field(Trial, n, models.Field).column) for n in per_row), *columns]
    )
    shared = ", ".join(values)
    shared = f", {shared}" if shared else ""
    table = quote(Trial._meta.db_table)
    if connection.vendor == "postgresql":
        sql = (
            f"INSERT INTO {table} ({names}) "
            f"SELECT gen_random_uuid(), %s, c.id, a.n, %s{shared} "
            "FROM unnest(%s::bigint[]) WITH ORDINALITY AS c (id, position) "
            "CROSS JOIN generate_series(1, %s) AS a (n) "
            "ORDER BY c.position, a.n "
            "RETURNING id, case_id, attempt"
        )
        args = [run_id, now, *params, list(case_ids), trials_per_case]
    elif connection.vendor == "sqlite":
        sql = (
            "WITH RECURSIVE a (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM a WHERE n < %s) "
            f"INSERT INTO {table} ({names}) "
            f"SELECT {_SQLITE_UUID4}, %s, id, n, %s{shared} "
            # h: random per row (per trial, not per case: the cross join is inside).
            "FROM (SELECT CAST(c.value AS INTEGER) AS id, c.key AS position, a.n AS n, "
            "lower(hex(randomblob(16))) AS h FROM json_each(%s) AS c CROSS JOIN a) "
            "ORDER BY position, n "
            "RETURNING id, case_id, attempt"
        )
        args = [trials_per_case, run_id, now, *params, json.dumps(list(case_ids))]
    else:  # pragma: no cover - the project runs on PostgreSQL and SQLite only
        raise RuntimeError(f"no queued-trials statement for {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        rows = cursor.fetchall()
    rows.sort(key=lambda row: (row[1], row[2]))
    return [row[0] for row in rows]
