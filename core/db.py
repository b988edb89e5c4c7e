"""Database plumbing shared by selectors: rows straight from the cursor."""

from __future__ import annotations

from django.db import connections, models


def raw_rows(queryset: models.QuerySet) -> list[tuple]:
    """Rows of a ``values_list`` queryset straight from the cursor, skipping Django's per-row
    converters (they were ~40% of ``run_report`` at 10,000 trials). Only for columns whose
    raw value is already what the caller needs: ints, floats, text (no bools, dates, JSON)."""
    sql, params = queryset.query.sql_with_params()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
