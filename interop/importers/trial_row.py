"""One row of a trial source as a ``TrialSpec``: the CSV/JSONL import (rules:
``interop.importers.tabular``), a run export read back and the ingest API all parse rows
here, so a value means the same on every path. Every refusal is a ``DomainError`` naming
the row and the field.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from core import bounds
from core.errors import DomainError
from core.strict_json import NON_FINITE, contains_non_finite
from core.text import UNSTORABLE, contains_unstorable
from evals.cases import CaseSpec, tags_problem
from evals.models import Grade, Trial
from interop.importers.agent_fields import AGENT_FIELDS, agent_fields_parse
from interop.importers.reader import TIME_RANGE, case_size_check, record_error, time_check
from interop.importers.trials_writer import GradeSpec, TrialSpec

# A trial that did not finish (queued, running) is no result and is refused.
TRIAL_STATUSES = tuple(Trial.Status.values)
UNFINISHED = (Trial.Status.QUEUED, Trial.Status.RUNNING)
VERDICT_FIELDS = ("passed", "score", "scores", "judge_status")
ERROR_MESSAGE_MAX = 100_000
DEFAULT_GRADER = "imported"
NOT_SCORED = "not scored"
_NON_FINITE_STRINGS = {
    "nan",
    "+nan",
    "-nan",
    "inf",
    "+inf",
    "-inf",
    "infinity",
    "+infinity",
    "-infinity",
}
_INT = re.compile(r"[0-9]+")
# A cost every rule of ``_decimal`` accepts as written: up to 6 digits (below 1,000,000),
# up to 12 decimals (a positive one is at least 1e-12, stored as it is), no sign, no space.
_PLAIN_COST = re.compile(r"[0-9]{1,6}(?:\.[0-9]{1,12})?")
INT_MAX = bounds.INT_MAX  # attempt and token counts: the database's integer columns
NAME_MAX = 200  # grader names
COST_LIMIT = bounds.COST_USD_LIMIT  # cost_usd is numeric(20, 12): below 1,000,000 USD ...
COST_STEP = bounds.COST_USD_QUANTUM  # ... and stored to 1e-12 USD (rounded half up)
_AGENT_SET = frozenset(AGENT_FIELDS)
OVERFLOW = "a number out of range (it overflows to infinity)"


def contains_overflow(value: Any) -> bool:
    """True when a parsed value holds a non-finite float (JSON ``1e400``), which canonical JSON
    cannot hold."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(contains_overflow(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_overflow(v) for v in value)
    return False


@dataclass
class Row:
    """One parsed row: ``where`` names it in errors; ``values`` field -> raw value; ``index``
    becomes ``DomainError.record``; ``needs_scan`` False skips the NaN and unstorable-text
    scans; ``error_field`` names the ``error`` field in errors (the API's ``error_message``)."""

    where: str
    values: dict[str, Any]
    extra: dict[str, Any]
    is_csv: bool
    index: int | None = None
    # False when the source text holds no NaN/Infinity token and no \u0000 or \ud8xx-style
    # escape: the scans for them are skipped.
    needs_scan: bool = True
    error_field: str = "error"


def _err(row: Row, name: str, msg: str) -> DomainError:
    if name == "error":
        name = row.error_field
    return record_error(row.where, name, msg, record=row.index)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _empty(value: Any) -> bool:
    return value is None or value == ""


def _string(row: Row, name: str) -> str | None:
    value = row.values.get(name)
    if type(value) is str:  # the common case first: the rules below give the same
        return value or None
    if _empty(value):
        return None
    if not isinstance(value, str):
        raise _err(row, name, f"expected a string, got {_show(value)}")
    return value


def _int(row: Row, name: str, *, minimum: int) -> int | None:
    value: Any = row.values.get(name)  # None (absent) is _empty
    if type(value) is int and not row.is_csv and minimum <= value <= INT_MAX:
        return value  # the common case first (``type`` excludes bool): the rules below agree
    if _empty(value):
        return None
    if row.is_csv:
        if not _INT.fullmatch(value):
            raise _err(row, name, f"expected an integer >= {minimum}, got {_show(value)}")
        if len(value) > 30:  # int() of 4,301 digits raises Python's own advice
            raise _err(row, name, f"expected an integer from {minimum} to {INT_MAX:,}")
        value = int(value)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise _err(row, name, f"expected an integer >= {minimum}, got {_show(value)}")
    if not minimum <= value <= INT_MAX:
        shown = bounds.int_text(value)
        raise _err(row, name, f"expected an integer from {minimum} to {INT_MAX:,}, got {shown}")
    return value


def _number(row: Row, name: str) -> float | None:
    value: Any = row.values.get(name)  # None (absent) is _empty
    if type(value) is float and not row.is_csv and 0 <= value <= bounds.LATENCY_MS_MAX:
        return value  # the common case first (NaN fails the comparison): the rules below agree
    if _empty(value):
        return None
    if row.is_csv:
        try:
            value = float(value)
        except ValueError:
            raise _err(row, name, f"expected a number, got {_show(value)}") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(row, name, f"expected a number, got {_show(value)}")
    if not math.isfinite(value) or value < 0:
        raise _err(row, name, f"expected a finite number >= 0, got {_show(value)}")
    problem = bounds.latency_problem(value)  # the one number field: latency_ms
    if problem:
        raise _err(row, name, problem)
    return float(value)


def _decimal(row: Row, name: str) -> Decimal | None:
    value = row.values.get(name)
    if type(value) is str and _PLAIN_COST.fullmatch(value):  # the common case first
        return Decimal(value).quantize(COST_STEP, rounding=ROUND_HALF_UP)  # the rules agree
    if _empty(value):
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _err(row, name, f"expected a decimal number of USD, got {_show(value)}")
    try:
        amount = Decimal(value if type(value) is str else str(value))
    except InvalidOperation:
        raise _err(row, name, f"expected a decimal number of USD, got {_show(value)}") from None
    if not amount.is_finite() or amount < 0:
        raise _err(row, name, f"expected a finite amount >= 0, got {_show(value)}")
    if amount >= COST_LIMIT:
        raise _err(row, name, f"expected an amount below {COST_LIMIT:,} USD, got {_show(value)}")
    problem = bounds.cost_problem(amount)  # a known cost that would be stored as 0 (free)
    if problem:
        raise _err(row, name, problem)
    return amount.quantize(COST_STEP, rounding=ROUND_HALF_UP)


def _datetime(row: Row, name: str) -> datetime | None:
    """ISO 8601 (offset-less: UTC), returned aware in UTC; outside years 1900..2999 a
    ``DomainError`` naming the field."""
    value = row.values.get(name)
    if _empty(value):
        return None
    if not isinstance(value, str):
        raise _err(row, name, f"expected an ISO 8601 date-time, got {_show(value)}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise _err(
            row,
            name,
            f"expected an ISO 8601 date-time such as 2025-02-24T15:30:00Z, got {_show(value)}",
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    utc = time_check(parsed)
    if utc is None:
        raise _err(row, name, f"expected a date-time {TIME_RANGE}, got {_show(value)}")
    return utc


def _passed(row: Row) -> bool | None:
    value = row.values.get("passed")
    if type(value) is bool and not row.is_csv:
        return value
    if _empty(value):
        return None
    if row.is_csv:
        if value in ("true", "false"):
            return value == "true"
    elif isinstance(value, bool):
        return value
    raise _err(row, "passed", f"expected true or false, got {_show(value)}")


def _score(row: Row, name: str, value: Any) -> tuple[bool, float | None]:
    """``(scored, score)``: (False, None) for null / NaN / Infinity (not scored)."""
    if _empty(value) or isinstance(value, NON_FINITE):
        return False, None
    if isinstance(value, str):
        if value.strip().lower() in _NON_FINITE_STRINGS:
            return False, None
        if not row.is_csv:
            raise _err(row, name, f"expected a number in [0, 1], got {_show(value)}")
        try:
            value = float(value)
        except ValueError:
            raise _err(row, name, f"expected a number in [0, 1], got {_show(value)}") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(row, name, f"expected a number in [0, 1], got {_show(value)}")
    if not math.isfinite(value):
        return False, None
    if not 0 <= value <= 1:
        raise _err(row, name, f"expected a number in [0, 1], got {value}")
    return True, float(value)


def tags_parse(row: Row) -> list[str]:
    """The ``tags`` field of ``row`` (rules: ``interop.importers.tabular``); [] when empty."""
    value: Any = row.values.get("tags")  # None (absent) is _empty
    if _empty(value):
        return []
    if row.is_csv and not value.lstrip().startswith("["):
        value = [t.strip() for t in value.split(",") if t.strip()]
    elif row.is_csv:  # a JSON array of strings (what an export writes for tags with commas)
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise _err(
                row, "tags", f"a cell starting with '[' must be a JSON array of strings: {exc}"
            ) from exc
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise _err(row, "tags", f"expected an array of strings, got {_show(value)}")
    problem = tags_problem(value)  # the rule of every path that writes a case
    if problem is not None:
        path, message = problem
        raise _err(row, f"tags{path}", message)
    return list(value)


def trial_status(row: Row) -> tuple[str, str]:
    """``(status, error message)`` of a row's trial (empty status: ``ok``), by the rules of
    ``interop.importers.tabular``: ``status`` exactly a finished ``Trial.Status``; ``error``
    (<= ``ERROR_MESSAGE_MAX`` characters) required with ``error``, refused with ``ok``; no
    verdict on a trial that is not ok. Raises ``DomainError`` naming the row and the field."""
    status = row.values.get("status")
    message = row.values.get("error")
    if _empty(status):
        status = Trial.Status.OK
    elif not isinstance(status, str) or status not in TRIAL_STATUSES:
        raise _err(
            row,
            "status",
            f"expected one of {', '.join(s for s in TRIAL_STATUSES if s not in UNFINISHED)}, "
            f"got {_show(status)}",
        )
    elif status in UNFINISHED:
        raise _err(
            row,
            "status",
            f"a {status} trial has not finished: import finished trials (ok, error) or "
            "cancelled ones",
        )
    if _empty(message):
        message = ""
    elif not isinstance(message, str):
        raise _err(row, "error", f"expected a string, got {_show(message)}")
    if status == Trial.Status.OK:
        if message:
            raise _err(row, "error", 'an error message needs status "error" (this row is ok)')
        return status, ""
    if status == Trial.Status.ERROR and not message.strip():
        raise _err(row, "error", 'required with status "error": what went wrong')
    if len(message) > ERROR_MESSAGE_MAX:
        raise _err(row, "error", f"longer than {ERROR_MESSAGE_MAX:,} characters")
    for name in VERDICT_FIELDS:
        value = row.values.get(name)
        if not _empty(value):
            raise _err(
                row,
                name,
                f"a trial with status {status!r} carries no verdict (got {_show(value)}): it "
                "is never graded; empty this field",
            )
    return status, message


def _grade(
    row: Row,
    *,
    grader: str,
    passed: bool | None,
    raw_score: Any,
    score_field: str,
    has_score: bool,
    status_override: str | None,
    reason: str | None,
    threshold: float | None,
) -> GradeSpec:
    scored, score = _score(row, score_field, raw_score) if has_score else (False, None)
    details = {"source": row.where}
    if status_override is not None:
        details["judge_status"] = status_override
        if has_score and not scored:
            return GradeSpec(grader, None, None, Grade.Status.ERROR, NOT_SCORED, details)
        return GradeSpec(grader, None, None, Grade.Status.ERROR, status_override, details)
    if passed is None:
        if score is None:  # not scored
            return GradeSpec(grader, None, None, Grade.Status.ERROR, NOT_SCORED, details)
        if threshold is None:
            raise _err(
                row,
                score_field,
                "a score without a passed verdict needs a pass "
                "threshold: give threshold, a number in [0, 1]",
            )
        passed = score >= threshold
        reason = reason or f"score {score:g} {'>=' if passed else '<'} threshold {threshold:g}"
    return GradeSpec(
        grader,
        passed,
        score,
        Grade.Status.OK,
        reason or f"imported verdict: {'pass' if passed else 'fail'}",
        details,
    )


class CaseMemo:
    """Case content already checked in one import, by key: a row repeating the last checked
    content of its key gets the same ``CaseSpec`` back. Only plain content is remembered (a
    string input, a string or null expected, raw ``tags``, compared by type and equality);
    anything else is checked on every row, so the first bad row fails with the same message."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[str, Any, Any, CaseSpec]] = {}

    def get(self, key: str, value: Any, row: Row) -> CaseSpec | None:
        """The remembered ``CaseSpec`` when the row's input, ``expected`` and ``tags`` match, else
        None."""
        known = self._by_key.get(key)
        if known is None or type(value) is not str or value != known[0]:
            return None
        expected, tags = row.values.get("expected"), row.values.get("tags")
        if (
            type(expected) is type(known[1])
            and expected == known[1]
            and type(tags) is type(known[2])
            and tags == known[2]
        ):
            return known[3]
        return None

    def put(self, case: CaseSpec, row: Row) -> None:
        """Remember ``case``, checked from ``row``, when its content is plain (see above)."""
        expected = row.values.get("expected")
        if type(case.input) is str and (expected is None or type(expected) is str):
            self._by_key[case.key] = (case.input, expected, row.values.get("tags"), case)


def row_parse(row: Row, *, threshold: float | None, cases: CaseMemo | None = None) -> TrialSpec:
    """Turn one mapped row into a TrialSpec; raises ``DomainError`` naming row and field.
    ``cases``: the import's ``CaseMemo`` (None checks every case). Long by design: one check per
    field, in ``tabular.FIELDS`` order."""
    if row.needs_scan:
        for name, value in row.values.items():
            if name in _AGENT_SET:  # their parsers name the step (agent_fields_parse)
                continue
            if name not in ("score", "scores") and contains_non_finite(value):
                raise _err(row, name, "NaN/Infinity is not valid JSON")
            if contains_unstorable(value):
                raise _err(row, name, UNSTORABLE)
        for column, value in row.extra.items():
            if contains_unstorable(column) or contains_unstorable(value):
                raise _err(row, column, UNSTORABLE)
    key = _string(row, "case_id")
    if key is None:
        raise _err(row, "case_id", "missing (every row needs a case key)")
    if len(key) > 200:
        raise _err(row, "case_id", f"longer than 200 characters ({len(key)})")
    value = row.values.get("input")
    agent = agent_fields_parse(row.values, where=row.where, record=row.index, text=row.is_csv)
    if agent.goal_state is not None:
        cases = None  # a goal state is content the memo does not compare: check it
    case = None if cases is None else cases.get(key, value, row)
    if case is None:  # not the content of an earlier row of this case: check it
        for name in ("input", "expected"):  # free-form JSON: a float may be 1e400 = inf
            raw = row.values.get(name)
            if type(raw) is not str and contains_overflow(raw):  # a string holds no float
                raise _err(row, name, OVERFLOW)
        if not _empty(value):
            if not isinstance(value, str | dict):
                raise _err(row, "input", f"expected a string or object, got {_show(value)}")
            case = CaseSpec(
                key=key,
                input=value,
                expected=row.values.get("expected"),
                context=[],
                tags=tags_parse(row),
                goal_state=agent.goal_state,
            )
            case_size_check(case, where=row.where, record=row.index)
            if cases is not None:
                cases.put(case, row)
    if agent.goal_state is not None and case is None:
        raise _err(
            row,
            "goal_state",
            "a goal state is part of the case's content: give the case's input with it",
        )
    attempt = _int(row, "attempt", minimum=1) or 1
    status, error = (
        (Trial.Status.OK, "")
        if row.values.get("status") is None and row.values.get("error") is None
        else trial_status(row)
    )
    # The optional strings, inline: a non-empty string or None is what ``_string`` gives
    # back as it is; anything else goes through it (its rules, its errors).
    get = row.values.get
    v = get("judge_status")
    judge_status = v if (type(v) is str and v) or v is None else _string(row, "judge_status")
    status_override = None if judge_status in (None, "ok") else judge_status
    v = get("reason")
    reason = v if (type(v) is str and v) or v is None else _string(row, "reason")
    v = get("grader")
    grader = (v if (type(v) is str and v) or v is None else _string(row, "grader")) or (
        DEFAULT_GRADER
    )
    if len(grader) > NAME_MAX:
        raise _err(row, "grader", f"longer than {NAME_MAX} characters ({len(grader)})")
    passed = _passed(row)
    grades: list[GradeSpec] = []
    has_score = "score" in row.values
    only_scores = "scores" in row.values and passed is None and not has_score
    if (passed is not None or has_score or status_override is not None) and not only_scores:
        grades.append(
            _grade(
                row,
                grader=grader,
                passed=passed,
                raw_score=row.values.get("score"),
                score_field="score",
                has_score=has_score,
                status_override=status_override,
                reason=reason,
                threshold=threshold,
            )
        )
    scores = row.values.get("scores")
    if not _empty(scores):
        if row.is_csv or not isinstance(scores, dict):
            raise _err(
                row, "scores", f"expected a JSON object grader -> score, got {_show(scores)}"
            )
        for name, raw in scores.items():
            if not name or name in {g.grader for g in grades}:
                raise _err(row, f"scores.{name}", "grader name empty or already graded")
            if len(name) > NAME_MAX:
                raise _err(
                    row,
                    f"scores.{name[:40]}...",
                    f"grader name longer than {NAME_MAX} characters ({len(name)})",
                )
            grades.append(
                _grade(
                    row,
                    grader=name,
                    passed=None,
                    raw_score=raw,
                    score_field=f"scores.{name}",
                    has_score=True,
                    status_override=status_override,
                    reason=None,
                    threshold=threshold,
                )
            )
    v = get("output")
    output = v if (type(v) is str and v) or v is None else _string(row, "output")
    v = get("model")
    model = v if (type(v) is str and v) or v is None else _string(row, "model")
    return TrialSpec(
        where=row.where,
        case_key=key,
        case=case,
        attempt=attempt,
        output=output or "",
        model=model or "",
        created_at=_datetime(row, "created_at"),
        input_tokens=_int(row, "input_tokens", minimum=0),
        output_tokens=_int(row, "output_tokens", minimum=0),
        cache_write_tokens=_int(row, "cache_write_tokens", minimum=0),
        cache_read_tokens=_int(row, "cache_read_tokens", minimum=0),
        reasoning_tokens=_int(row, "reasoning_tokens", minimum=0),
        latency_ms=_number(row, "latency_ms"),
        cost_usd=_decimal(row, "cost_usd"),
        grades=grades,
        raw=row.extra,
        index=row.index,
        status=status,
        error=error,
        trajectory=agent.trajectory,
        final_state=agent.final_state,
    )
