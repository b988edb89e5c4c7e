"""CSV and JSONL results with a column mapping (``field=column``): one row is one trial.

Fields (left of ``=``) and their rules; "empty" means a missing JSONL key, JSON null, or an
empty CSV cell. **An empty CSV cell is null, never the empty string**, and an empty
optional field is null:
- ``case_id`` (required): the case key, <= 200 chars.
- ``input``: the case input (JSONL: string or object). A row whose input is empty (or
  unmapped) refers to a case already active in the suite (an error if there is none).
- ``expected``: any JSON value (CSV: the string; an empty cell is null: the case has no
  reference, so a reference grader gives an errored grade, not a fail).
- ``tags``: CSV comma-separated (spaces trimmed), or a JSON array of strings when the cell
  starts with ``[`` (what an export writes for tags holding commas); JSONL an array of strings.
- ``output``: the trial output, stored whole ("" when empty). ``attempt``: integer >= 1,
  default 1 (CSV: digits only). ``model``: string.
- ``status``: the trial's status, exactly one of ``ok`` (default when empty), ``error``
  (the pipeline failed: an errored trial, counted in the run's errored trials, never a
  pass and never a skip) or ``cancelled``; ``queued``/``running`` (not finished) and any
  other value (``failed``, ``Error``) are refused naming the row and field.
  ``error``: what went wrong, required with ``error``, refused with ``ok``, optional with
  ``cancelled`` (at most 100,000 characters). A trial that is not ok carries no verdict:
  ``passed``, ``score``, ``scores`` or ``judge_status`` on it is refused (``error`` with
  ``passed`` true is a contradiction), so it is never graded (``trial_status``).
- Integers (``attempt``, tokens) are at most 2,147,483,647; no string may hold U+0000 (NUL)
  or a lone surrogate (JSON ``\\ud800``): the database cannot store them; both are refused
  naming the field.
- ``created_at``: ISO 8601; with an offset or ``Z`` it is converted to UTC; **without an
  offset it is read as UTC**. It must lie from 1900-01-01T00:00:00Z to 2999-12-31T23:59:59Z
  once in UTC (``reader.time_check``). Anything else rejects the row.
- ``passed``: JSONL ``true``/``false`` only; CSV the exact strings ``true``/``false``
  (``1``, ``yes``, ``True`` are rejected).
- ``score``: a number in [0, 1]. ``scores`` (JSONL only): an object grader -> score, one
  grade per grader. A null, ``NaN``/``Infinity`` (bare token or string, CSV ``nan``/``inf``)
  score is **not scored**: an errored grade with reason ``not scored``, never 0.
  A score without ``passed`` needs a pass threshold (``threshold``; the command's
  ``--threshold``): passed = score >= it.
- ``judge_status``: empty or ``ok`` = graded; any other value (e.g. ``unparseable``) makes
  every grade of the row errored: reason ``not scored`` when its score is missing, else the
  judge_status value (kept in ``details.judge_status`` either way).
- ``reason``: the grade's reason. ``grader``: the name of the grade's grader (default
  ``imported``), at most 200 characters (so are ``scores`` keys).
- ``input_tokens``, ``output_tokens``: integers >= 0; ``latency_ms``: milliseconds from 0 to
  86,400,000 (one day; ``core.bounds``, so ``1e308`` is refused naming the row and field);
  ``cost_usd``: decimal USD >= 0 and below 1,000,000 (empty = unknown = null, never 0),
  stored to 1e-12 USD (12 decimal places, rounded half up; a positive cost below 5e-13, which
  would be stored as 0, is refused).
- ``trajectory``, ``final_state``, ``goal_state``: an agent's (``interop.importers.
  agent_fields``, the mapping of every importer; CSV: JSON text). ``{}`` is a state; a goal
  state is the case's content and needs the row's ``input``.

Unmapped columns are kept in ``Trial.raw_response["extra"]`` (column -> value as read; an
empty CSV cell is null), except a column (JSONL: key) named ``status`` or ``error`` in any
case and with any surrounding spaces (``Status``, `` ERROR ``): left unmapped (by a given
mapping, or with no mapping, which maps only exact names) while its field reads no other
column of the row, it is refused (map it, ``status=Status``, or rename it), since kept as
extra it would let a failed row pass for an ok trial.
A CSV with the header of Assay's own run export and no mapping is read by the export's
rules instead, types intact (``interop.importers.run_export``).
Without any mapping, a column named exactly like a field maps to it; with one, an agent field
it leaves out still reads the column of its own name (``trajectory``, ...), if no field reads it.
A row with no verdict at all (no passed, score, scores or judge_status) gets no grade.
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
    """The status field a column (JSONL: key) names, in any case and with any surrounding
    spaces (``" Status "`` -> ``"status"``, ``"ERROR"`` -> ``"error"``), or None."""
    name = column.strip().lower() if isinstance(column, str) else None
    return name if name in STATUS_FIELDS else None


def unmapped_status_column(columns, mapping: dict[str, str], *, present=None) -> str | None:
    """The first of ``columns`` naming ``status`` or ``error`` (``status_column_field``: any
    case, surrounding spaces) that ``mapping`` (field -> column) leaves unmapped: no field
    reads it and its field does not read another column of ``present`` (the row's columns
    or keys; default ``columns``); or None. Kept as extra text, it would let a failed row
    pass for an ok trial."""
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
    """Rows of JSONL records read through ``mapping`` (the user's, or the default one of
    exact names); a key left unmapped that names ``status`` or ``error`` (any case,
    surrounding spaces: ``unmapped_status_column``) is refused naming the line."""
    for line, obj in records:
        fields, extra = _mapped(obj, mapping)
        # Only the unmapped keys (most records: none) can be an unmapped status key.
        if extra and any(status_column_field(k) for k in extra):
            unmapped = unmapped_status_column(extra, mapping, present=obj)
            if unmapped is not None:
                raise _unmapped_status_error(unmapped, f"line {line}")
        yield Row(where=f"line {line}", values=fields, extra=extra, is_csv=False)


def _agent_mapped(mapping: dict[str, str], header: list[str] | None) -> dict[str, str]:
    """``mapping`` with each agent field it leaves out mapped to the column (JSONL: key) of
    its own name, when no field reads that column (and, for a CSV, the header has it): an
    agent's steps are never kept as extra text by a mapping that did not name them."""
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
    """Store CSV (``source = (header, rows)`` from ``reader.csv_rows``) or JSONL
    (``source`` = ``reader.jsonl_records``) rows as trials of one new run ``ctx.run_name``.

    Raises ``DomainError`` naming the row/line and field; duplicate (case_id, attempt)
    and one case key with two different inputs/expected are errors naming both rows.
    """
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
