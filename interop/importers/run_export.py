"""Reading Assay's own CSV run export back, types intact: a CSV with no column mapping and the
run export's header (``RUN_EXPORT_COLUMNS``, ``interop.exports.AGENT_COLUMNS`` for agent
runs, then ``<grader>.passed|status|score|reason`` per grader).

1. Text cells are restored with ``interop.exports.formula_restore``.
2. ``input``, ``expected`` and ``context`` keep their JSON types: the export writes a string
   as text and anything else as compact JSON, so ``4`` is ambiguous; the reading whose hash
   matches the row's ``content_hash`` is taken. A row matching no reading (an edited file)
   is refused naming ``content_hash``; with that cell empty, cells are read as typed JSON
   (valid non-string JSON is that value, else text; an empty ``expected`` is null).
3. The trial keeps its ``status`` and ``error`` (``trial_row`` rules: finished only, never a
   pass when not ok); numbers, times and cost follow the CSV import's rules; the five token
   classes are whole numbers >= 0 or empty (unknown), refused naming row and column. An
   export written before the cache and reasoning columns (its header without them) is read
   with those classes unknown. ``cost_basis`` is not in the CSV: an imported trial has none.
4. A grader's four cells become its grade (``passed`` ``true``/``false``/empty, ``status``
   ``ok``/``error``/``not_judged``, ``score`` in [0, 1] or empty); four empty cells: none.
5. ``suite`` and ``run`` are not read: the import names its own.
6. Agent columns are JSON text (empty: null) read by ``evals.trajectory.steps``; the goal
   state is case content, in the ``content_hash``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from core.errors import DomainError, value_shown
from core.strict_json import json_loads_line
from core.text import UNSTORABLE, contains_unstorable
from evals.cases import CaseSpec, context_problem
from evals.models import Grade, Trial, content_hash
from interop.exports import AGENT_COLUMNS, formula_restore
from interop.importers.agent_fields import agent_fields_parse
from interop.importers.context import ImportContext
from interop.importers.reader import CsvRow, case_size_check, record_error
from interop.importers.trial_row import Row, contains_overflow, row_parse, tags_parse
from interop.importers.trials_writer import GradeSpec, TrialSpec, TrialsWriter
from providers.usage import EXTRA_TOKEN_FIELDS as EXTRA_TOKEN_CLASSES

RUN_EXPORT_COLUMNS = (
    "suite",
    "run",
    "case_id",
    "content_hash",
    "input",
    "expected",
    "context",
    "tags",
    "attempt",
    "status",
    "output",
    "error",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    *EXTRA_TOKEN_CLASSES,
    "cost_usd",
    "created_at",
)
# An export written before the cache and reasoning classes: read with them unknown.
_COLUMNS_BEFORE_CLASSES = tuple(c for c in RUN_EXPORT_COLUMNS if c not in EXTRA_TOKEN_CLASSES)
GRADE_CELLS = ("passed", "status", "score", "reason")
TEXT_COLUMNS = {
    *AGENT_COLUMNS,
    "case_id",
    "content_hash",
    "input",
    "expected",
    "context",
    "tags",
    "status",
    "output",
    "error",
}
# The fields ``trial_row.row_parse`` reads from an export row (the rest is read here).
_PLAIN_FIELDS = (
    "case_id",
    "tags",
    "attempt",
    "output",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    *EXTRA_TOKEN_CLASSES,
    "cost_usd",
    "created_at",
)
TRIAL_STATUSES = (Trial.Status.OK, Trial.Status.ERROR, Trial.Status.CANCELLED)
_NO_JSON = object()


def _fixed_columns(header: list[str]) -> int | None:
    """How many of ``header``'s first columns are a run export's fixed ones (this version's,
    or one written before the cache and reasoning classes), or None when it starts otherwise."""
    for columns in (RUN_EXPORT_COLUMNS, _COLUMNS_BEFORE_CLASSES):
        if tuple(header[: len(columns)]) == columns:
            return len(columns)
    return None


def run_export_graders(header: list[str]) -> list[str] | None:
    """The grader keys of a run export's header, in order, or None when ``header`` is not one."""
    fixed = _fixed_columns(header)
    if fixed is None:
        return None
    if tuple(header[fixed : fixed + len(AGENT_COLUMNS)]) == AGENT_COLUMNS:
        fixed += len(AGENT_COLUMNS)
    if (len(header) - fixed) % 4:
        return None
    keys = []
    for i in range(fixed, len(header), 4):
        group = [formula_restore(h) for h in header[i : i + 4]]
        key = group[0].removesuffix(".passed")
        if group != [f"{key}.{cell}" for cell in GRADE_CELLS] or not key:
            return None
        keys.append(key)
    return keys


def _json(text: str) -> Any:
    """``text`` as strict JSON, or ``_NO_JSON`` (not JSON, or a bare NaN/Infinity)."""
    try:
        value = json_loads_line(text)
    except ValueError:
        return _NO_JSON
    return value if _finite(value) else _NO_JSON


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return value is None or isinstance(value, str | int | bool)


def _typed(text: str) -> Any:
    """The typed-JSON reading of a cell: valid JSON other than a string is that value; any
    other cell is its text."""
    value = _json(text)
    return text if value is _NO_JSON or isinstance(value, str) else value


def _agent_cell(row: CsvRow, cells: dict[str, str], name: str) -> Any:
    """An agent column's JSON text through ``agent_fields_parse`` (None when absent or empty)."""
    parsed = agent_fields_parse({name: cells.get(name) or None}, where=row.where, text=True)
    return getattr(parsed, name)


def _case(row: CsvRow, cells: dict[str, str], tags: list[str]) -> CaseSpec:
    where = row.where
    goal_state = _agent_cell(row, cells, "goal_state")
    context_cell = cells["context"]
    context = _json(context_cell) if context_cell else []
    if not isinstance(context, list) or not all(isinstance(d, dict) for d in context):
        raise record_error(where, "context", "expected a JSON array of objects")
    problem = context_problem(context)  # the rule of every path that writes a case
    if problem is not None:
        path, message = problem
        raise record_error(where, f"context{path}", message)
    input_cell, expected_cell = cells["input"], cells["expected"]
    inputs: list[Any] = [input_cell]
    parsed = _json(input_cell)
    if isinstance(parsed, dict):
        inputs.append(parsed)
    expecteds: list[Any] = [None, ""] if expected_cell == "" else [expected_cell]
    parsed = _json(expected_cell) if expected_cell else _NO_JSON
    if parsed is not _NO_JSON and parsed not in expecteds:
        expecteds.append(parsed)
    want = cells["content_hash"]
    chosen: tuple[Any, Any] | None  # (input, expected)
    if not want:
        chosen = (
            _typed(input_cell) if isinstance(_typed(input_cell), dict) else input_cell,
            None if expected_cell == "" else _typed(expected_cell),
        )
    else:
        chosen = next(
            (
                (i, e)
                for i in inputs
                for e in expecteds
                if content_hash(input=i, expected=e, context=context, goal_state=goal_state) == want
            ),
            None,
        )
        if chosen is None:
            raise record_error(
                where,
                "content_hash",
                "the input, expected and context cells do not give this content hash (was "
                "the file edited?); empty the content_hash cell to read them as typed JSON",
            )
    for name, value in (("input", chosen[0]), ("expected", chosen[1]), ("context", context)):
        if contains_unstorable(value):
            raise record_error(where, name, UNSTORABLE)
        if contains_overflow(value):
            raise record_error(where, name, "a number out of range")
    return case_size_check(
        CaseSpec(
            key=cells["case_id"],
            input=chosen[0],
            expected=chosen[1],
            context=context,
            tags=tags,
            goal_state=goal_state,
        ),
        where=where,
    )


def _grade(row: CsvRow, key: str, cells: dict[str, str]) -> GradeSpec | None:
    passed, status, score, reason = (
        cells[f"{key}.passed"],
        formula_restore(cells[f"{key}.status"]),
        cells[f"{key}.score"],
        formula_restore(cells[f"{key}.reason"]),
    )
    if not (passed or status or score or reason):
        return None
    if passed not in ("", "true", "false"):
        raise record_error(
            row.where, f"{key}.passed", f"expected true, false or empty, got {value_shown(passed)}"
        )
    if status not in Grade.Status.values:
        raise record_error(
            row.where,
            f"{key}.status",
            f"expected one of {', '.join(Grade.Status.values)}, got {value_shown(status)}",
        )
    value = None
    if score:
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 <= value <= 1):
            raise record_error(
                row.where,
                f"{key}.score",
                f"expected a number in [0, 1] or empty, got {value_shown(score)}",
            )
    if contains_unstorable(reason):
        raise record_error(row.where, f"{key}.reason", UNSTORABLE)
    return GradeSpec(
        grader=key,
        passed=None if passed == "" else passed == "true",
        score=value,
        status=status,
        reason=reason,
        details={"source": row.where},
    )


def run_export_row(row: CsvRow, graders: list[str]) -> TrialSpec:
    """One row as a ``TrialSpec`` (module docstring). Raises ``DomainError`` naming row and
    field."""
    cells = {
        name: formula_restore(value) if name in TEXT_COLUMNS else value
        for name, value in row.values.items()
    }
    plain = Row(
        where=row.where,
        values={name: (cells.get(name) or None) for name in _PLAIN_FIELDS},
        extra={},
        is_csv=True,
    )
    spec = row_parse(plain, threshold=None)
    status = cells["status"]
    if status not in TRIAL_STATUSES:
        raise record_error(
            row.where,
            "status",
            f"expected one of {', '.join(TRIAL_STATUSES)}, got {value_shown(status)}",
        )
    if contains_unstorable(cells["error"]):
        raise record_error(row.where, "error", UNSTORABLE)
    spec.case = _case(row, cells, tags_parse(plain))
    spec.status, spec.error = status, cells["error"]
    spec.trajectory = _agent_cell(row, cells, "trajectory")
    spec.final_state = _agent_cell(row, cells, "final_state")
    spec.grades = [g for key in graders if (g := _grade(row, key, cells)) is not None]
    if status != Trial.Status.OK:
        passing = next((g.grader for g in spec.grades if g.passed), None)
        if passing is not None:  # a failure of the pipeline is never a pass
            raise record_error(
                row.where,
                f"{passing}.passed",
                f"a trial with status {status!r} is never graded passed: the row contradicts "
                "itself",
            )
    return spec


def run_export_import(
    *, ctx: ImportContext, header: list[str], rows: Iterator[CsvRow], graders: list[str]
) -> None:
    """Store a run export's rows (``reader.csv_rows``) as the trials of new run ``ctx.run_name``.
    Raises ``DomainError`` naming row and field; the caller's transaction makes it all or
    nothing."""
    run = ctx.run_create(name=ctx.run_name, fmt="csv", extra={"run_export": True})
    writer = TrialsWriter(ctx=ctx, run=run)
    for row in rows:
        writer.add(run_export_row(row, graders))
    if writer.added == 0:
        raise DomainError("the file holds no rows")
    writer.finish()


def run_export_check(header: list[str]) -> None:
    """Refuse a header that starts like a run export but is not one (a grader column group broken
    by an edit), rather than import its grades as extra text."""
    if _fixed_columns(header) is not None and run_export_graders(header) is None:
        raise DomainError(
            "line 1: CSV header: starts like an Assay run export, but the grader columns "
            "are not in groups of <grader>.passed, .status, .score, .reason"
        )
