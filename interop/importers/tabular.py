"""CSV and JSONL results with a column mapping (``field=column``): one row is one trial.

Fields and their rules ("empty": a missing JSONL key, JSON null, or an empty CSV cell;
**an empty CSV cell is null, never the empty string**; an empty optional field is null):
- ``case_id`` (required): the case key, <= 200 chars.
- ``input``: the case input (JSONL: string or object); empty refers to a case already
  active in the suite (an error if there is none).
- ``expected``: any JSON value (CSV: the string); empty is no reference, so a reference
  grader gives an errored grade, not a fail.
- ``tags``: CSV comma-separated (trimmed), or a JSON array when the cell starts with ``[``;
  JSONL an array of strings.
- ``output``: stored whole ("" when empty). ``attempt``: integer >= 1, default 1 (CSV: digits
  only). ``model``: string.
- ``status``: exactly ``ok`` (default), ``error`` (an errored trial, never a pass or a skip)
  or ``cancelled``; anything else is refused naming the row and field. ``error``: required
  with ``error``, refused with ``ok``, at most 100,000 characters. A trial that is not ok
  carries no verdict: ``passed``, ``score``, ``scores`` or ``judge_status`` on it is refused.
- Integers are at most 2,147,483,647; strings may hold no U+0000 or lone surrogate (JSON
  ``\ud800``); both are refused naming the field.
- ``created_at``: ISO 8601, converted to UTC; **without an offset it is read as UTC**; from
  1900-01-01 to 2999-12-31 in UTC (``reader.time_check``).
- ``passed``: JSONL ``true``/``false``; CSV exactly ``true``/``false`` (``1``, ``True``
  refused).
- ``score``: a number in [0, 1]; ``scores`` (JSONL only): grader -> score. A null or
  ``NaN``/``Infinity`` score (CSV ``nan``/``inf``) is **not scored**: an errored grade, never
  0. A score without ``passed`` needs ``threshold`` (``--threshold``): passed = score >= it.
- ``judge_status``: empty or ``ok`` = graded; any other value errors every grade of the row
  (reason ``not scored`` without a score, else the value; kept in ``details.judge_status``).
- ``reason``; ``grader`` (default ``imported``; it and ``scores`` keys <= 200 characters).
- ``input_tokens``, ``output_tokens``: integers >= 0; ``latency_ms``: 0 to 86,400,000 ms
  (``core.bounds``); ``cost_usd``: decimal USD in [0, 1,000,000) (empty = unknown, never 0),
  stored to 1e-12 USD rounded half up (a positive cost below 5e-13 is refused).
- ``trajectory``, ``final_state``, ``goal_state``: an agent's (``interop.importers.
  agent_fields``; CSV: JSON text). ``{}`` is a state; a goal state needs the row's ``input``.

Unmapped columns are kept in ``Trial.raw_response["extra"]``, except one named ``status`` or
``error`` in any case and spacing (``Status``): left unmapped while its field reads no other
column, it is refused (kept as extra, a failed row would pass for an ok trial). Without a
mapping a column named exactly like a field maps to it, and a CSV with Assay's run export
header is read by ``interop.importers.run_export``; with one, an agent field it leaves out
still reads the column of its name if free. A row without any verdict gets no grade.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.errors import DomainError
from core.strict_json import NON_FINITE
from interop.importers.agent_fields import AGENT_FIELDS
from interop.importers.context import ImportContext
from interop.importers.trial_row import CaseMemo, Row, row_parse
from interop.importers.trials_writer import TrialsWriter

FIELDS = (
    "case_id",
    "input",
    "expected",
    "output",
    "status",
    "error",
    "attempt",
    "tags",
    "created_at",
    "passed",
    "score",
    "scores",
    "judge_status",
    "reason",
    "grader",
    "model",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "cost_usd",
    *AGENT_FIELDS,
)
# A trial's own fields: its status (``Trial.Status``) and, for an errored one, what went
# wrong (read by ``interop.importers.trial_row.trial_status``).
STATUS_FIELDS = ("status", "error")


def mapping_parse(items: list[str]) -> dict[str, str]:
    """``["case_id=id", ...]`` -> ``{"case_id": "id"}``; raises ``DomainError`` for a
    malformed item, an unknown field or a field mapped twice."""
    mapping: dict[str, str] = {}
    for item in items:
        item = item.strip()
        if not item:
            continue
        name, sep, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not name or not column:
            raise DomainError(f"mapping {item!r}: expected field=column")
        if name not in FIELDS:
            raise DomainError(
                f"mapping {item!r}: unknown field {name!r} (fields: {', '.join(FIELDS)})"
            )
        if name in mapping:
            raise DomainError(f"mapping: field {name!r} is mapped twice")
        mapping[name] = column
    return mapping


def _mapped(values: dict[str, Any], mapping: dict[str, str]) -> tuple[dict, dict]:
    fields = {name: values[col] for name, col in mapping.items() if col in values}
    used = set(mapping.values())
    extra = {
        col: (None if isinstance(v, NON_FINITE) else v)
        for col, v in values.items()
        if col not in used
    }
    return fields, extra


_STATUS_COLUMN_MEANS = {
    "status": "the trial's status: ok, error or cancelled",
    "error": "what went wrong in an errored trial",
}


def status_column_field(column: str) -> str | None:
    """The status field a column names ignoring case and surrounding spaces (``" Status "`` ->
    ``"status"``), or None."""
    name = column.strip().lower() if isinstance(column, str) else None
    return name if name in STATUS_FIELDS else None


def unmapped_status_column(columns, mapping: dict[str, str], *, present=None) -> str | None:
    """The first of ``columns`` naming ``status``/``error`` that ``mapping`` leaves unmapped
    while its field reads no other column of ``present`` (default ``columns``), or None."""
    present = columns if present is None else present
    used = set(mapping.values())
    for column in columns:
        field = status_column_field(column)
        if field is not None and column not in used and mapping.get(field) not in present:
            return column
    return None


def _unmapped_status_error(column: str, where: str = "") -> DomainError:
    field = status_column_field(column)
    assert field is not None  # column is one unmapped_status_column returned
    if column == column.strip():
        advice = f"map it ({field}={column}: {_STATUS_COLUMN_MEANS[field]}), or rename or remove"
    else:  # a mapping's column names are trimmed: it cannot name this one
        advice = f"rename it {field} ({_STATUS_COLUMN_MEANS[field]}) or remove"
    message = (
        f"the column {column!r} is not mapped: {advice} the column; an unmapped "
        f"{field} would let a failed row pass for an ok trial"
    )
    if where:
        return DomainError(message, field="mapping", detail=f"{where}: mapping: {message}")
    return DomainError(message, field="mapping")


def _csv_rows(rows_iter, header: list[str], mapping: dict[str, str]) -> Iterator[Row]:
    missing = [f"{name}={col}" for name, col in mapping.items() if col not in header]
    if missing:
        raise DomainError(
            f"mapping {', '.join(missing)}: column not in the CSV header "
            f"(columns: {', '.join(header)})"
        )
    unmapped = unmapped_status_column(header, mapping)
    if unmapped is not None:
        raise _unmapped_status_error(unmapped)
    for r in rows_iter:
        # An empty CSV cell is null, never "": an empty expected is no reference (a
        # reference grader errors on it instead of failing every output), an empty
        # unmapped column is kept as null.
        values = {column: (None if value == "" else value) for column, value in r.values.items()}
        fields, extra = _mapped(values, mapping)
        yield Row(where=r.where, values=fields, extra=extra, is_csv=True)


def _jsonl_rows(records, mapping: dict[str, str]) -> Iterator[Row]:
    """Rows of JSONL records read through ``mapping``; an unmapped ``status``/``error`` key is
    refused naming the line."""
    for line, obj in records:
        fields, extra = _mapped(obj, mapping)
        # Only the unmapped keys (most records: none) can be an unmapped status key.
        if extra and any(status_column_field(k) for k in extra):
            unmapped = unmapped_status_column(extra, mapping, present=obj)
            if unmapped is not None:
                raise _unmapped_status_error(unmapped, f"line {line}")
        yield Row(where=f"line {line}", values=fields, extra=extra, is_csv=False)


def _agent_mapped(mapping: dict[str, str], header: list[str] | None) -> dict[str, str]:
    """``mapping`` with each agent field it leaves out mapped to the column of its own name, when
    free (and, for a CSV, present)."""
    used = set(mapping.values())
    added = {
        name: name
        for name in AGENT_FIELDS
        if name not in mapping and name not in used and (header is None or name in header)
    }
    return {**mapping, **added} if added else mapping


def tabular_import(
    *, ctx: ImportContext, fmt: str, source, mapping: dict[str, str], threshold: float | None = None
) -> None:
    """Store CSV (``(header, rows)`` from ``reader.csv_rows``) or JSONL
    (``reader.jsonl_records``) rows as trials of one new run ``ctx.run_name``. Raises
    ``DomainError`` naming the row/line and field; a duplicate (case_id, attempt) or one case
    key with two contents names both rows."""
    if threshold is not None and not (0 <= threshold <= 1):
        raise DomainError(f"threshold: expected a number in [0, 1], got {threshold}")
    if fmt == "csv":
        header, rows_iter = source
        mapping = _agent_mapped(mapping or {c: c for c in header if c in FIELDS}, header)
        rows = _csv_rows(rows_iter, header, mapping)
    else:
        mapping = _agent_mapped(mapping or {f: f for f in FIELDS}, None)
        rows = _jsonl_rows(source, mapping)
    if "case_id" not in mapping:
        raise DomainError("mapping: field case_id is required (--map case_id=COLUMN)")
    run = ctx.run_create(name=ctx.run_name, fmt=fmt, extra={"mapping": mapping})
    writer = TrialsWriter(ctx=ctx, run=run)
    cases = CaseMemo()
    for row in rows:
        writer.add(row_parse(row, threshold=threshold, cases=cases))
    if writer.added == 0:
        raise DomainError("the file holds no rows")
    writer.finish()
