"""The grid of runs (``evals.grid.build.grid_get``) as an ``interop.exports`` table: one row per
cell (case × run), in the grid's row and column order.

Columns: ``case_id``, ``case_uuid``, ``tags``; ``run_uuid``, ``run_name``, ``run_created_at``
(in the export's zone), ``is_baseline``; ``passed``, ``graded``, ``errored``, ``trials``,
``rate``, ``ci_low``, ``ci_high`` (Wilson 95%), ``flaky``; the row's ``variance`` and
``change``; ``hidden``: a cell blind for the user (``evals.blindness``), its counts null.
The queries of ``grid_get``, whatever the grid's size.
"""

from __future__ import annotations

from datetime import UTC, tzinfo
from typing import Any

import pyarrow as pa

from evals.grid.build import GridQuery, grid_get
from evals.models import Suite
from interop.exports import ExportTable

GRID_COLUMNS = [
    ("case_id", pa.string()),
    ("case_uuid", pa.string()),
    ("tags", pa.list_(pa.string())),
    ("run_uuid", pa.string()),
    ("run_name", pa.string()),
    ("run_created_at", None),  # timestamp in the export's zone, set per table
    ("is_baseline", pa.bool_()),
    ("passed", pa.int64()),
    ("graded", pa.int64()),
    ("errored", pa.int64()),
    ("trials", pa.int64()),
    ("rate", pa.float64()),
    ("ci_low", pa.float64()),
    ("ci_high", pa.float64()),
    ("flaky", pa.bool_()),
    ("hidden", pa.bool_()),
    ("variance", pa.float64()),
    ("change", pa.string()),
]


def grid_table(*, suite: Suite, query: GridQuery, viewer, zone: tzinfo = UTC) -> ExportTable:
    """The grid of ``suite`` for ``query`` as ``viewer`` sees it, one row per cell (module
    docstring). Raises ``DomainError`` as ``grid_get``."""
    grid = grid_get(suite=suite, query=query, viewer=viewer)
    columns = [
        (name, typ if typ is not None else pa.timestamp("us", tz=str(zone)))
        for name, typ in GRID_COLUMNS
    ]
    rows = []
    for row in grid.rows:
        for col, cell in zip(grid.columns, row.cells, strict=True):
            if cell is None:
                continue
            counts: list[Any] = (
                [None] * 8
                if cell.hidden
                else [
                    cell.passed,
                    cell.graded,
                    cell.errored,
                    cell.trials,
                    cell.rate,
                    cell.low,
                    cell.high,
                    cell.flaky,
                ]
            )
            rows.append(
                [
                    row.key,
                    row.case_uuid,
                    list(row.tags),
                    col.uuid,
                    col.name,
                    col.created_at.astimezone(zone),
                    col.is_baseline,
                    *counts,
                    cell.hidden,
                    row.variance,
                    row.change,
                ]
            )
    return ExportTable(columns=columns, rows=rows)
