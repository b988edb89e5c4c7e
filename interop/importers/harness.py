"""What the promptfoo and Inspect AI importers share: one JSON document read strictly, values
checked, parsed trials stored as one new run.

``json_document``: the file is one JSON value; BOM stripped, strict UTF-8, no key twice;
bare ``NaN``/``Infinity`` become ``reader.NON_FINITE``, which only score fields accept;
unstorable text (``core.text``) is refused. Errors name the JSON path, e.g.
``results.results[4].latencyMs: expected a number >= 0, got -3``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, BinaryIO, Literal, overload

from core.bounds import cost_problem, count_problem, latency_problem
from core.chunks import chunked
from core.errors import DomainError
from core.strict_json import NON_FINITE, json_loads_line
from core.text import unstorable_refuse
from evals.cases import CaseSpec, size_problem
from evals.models import Grade, Trial
from interop.importers.context import BATCH_SIZE, ImportContext, run_finish
from interop.importers.reader import BOM

KEY_MAX = 200


def json_document(stream: BinaryIO, *, refuse_unstorable: bool = True) -> Any:
    """Parse binary ``stream``, read whole, as one JSON document (module docstring). Raises
    ``DomainError``: ``"byte offset 57: invalid UTF-8 ..."``, ``"line 3 column 9: invalid JSON:
    ..."``, ``"samples[2].output.completion: holds U+0000 ..."``."""
    stream.seek(0)
    data = stream.read()
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise DomainError(
            f"byte offset {exc.start}: invalid UTF-8 ({exc.reason}); save the file as UTF-8"
        ) from None
    try:
        document = json_loads_line(text)
    except json.JSONDecodeError as exc:
        raise DomainError(
            f"line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise DomainError(f"invalid JSON: {exc}") from None
    if refuse_unstorable and "\\u" in text:  # NUL and lone surrogates come only as escapes
        unstorable_refuse(document)
    return document


def fail(path: str, msg: str) -> DomainError:
    """The error for field ``path`` (a JSON path such as ``samples[3].epoch``)."""
    return DomainError(msg, field=path)


def case_size_check_at(case: CaseSpec, paths: dict[str, str]) -> CaseSpec:
    """Refuse a case over ``evals.cases.size_problem``'s limits (code "too_large"), naming the
    file's path of the field: ``paths`` maps a case field to it (``{"expected":
    "samples[3].target"}``; missing: its own name). Returns ``case``."""
    problem = size_problem(case)
    if problem is not None:
        name, message = problem
        raise DomainError(message, field=paths.get(name, name), code="too_large")
    return case


def show(value: Any) -> str:
    """A short repr of a bad value for an error message."""
    if isinstance(value, NON_FINITE):
        return f"{value!r} (not valid JSON)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def need(obj: dict, key: str, path: str) -> Any:
    """``obj[key]``, or an error naming ``path.key`` as missing."""
    if key not in obj:
        raise fail(f"{path}.{key}", "missing")
    return obj[key]


def as_dict(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise fail(path, f"expected an object, got {show(value)}")
    return value


def as_list(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise fail(path, f"expected an array, got {show(value)}")
    return value


@overload
def as_str(value: Any, path: str, *, nullable: Literal[False] = False) -> str: ...
@overload
def as_str(value: Any, path: str, *, nullable: bool) -> str | None: ...
def as_str(value: Any, path: str, *, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise fail(path, f"expected a string{' or null' if nullable else ''}, got {show(value)}")
    return value


def as_bool(value: Any, path: str) -> bool:
    """JSON ``true``/``false`` only: ``"true"`` and ``1`` are refused (no coercion)."""
    if not isinstance(value, bool):
        raise fail(path, f"expected true or false, got {show(value)}")
    return value


def opt_count(value: Any, path: str) -> int | None:
    """An optional integer >= 0 (tokens): null/absent -> None; anything else strict."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(path, f"expected an integer >= 0 or null, got {show(value)}")
    problem = count_problem(value)
    if problem:
        raise fail(path, problem)
    return value


def opt_latency_ms(value: Any, path: str, *, per_unit_ms: float = 1.0) -> float | None:
    """An optional latency in units of ``per_unit_ms`` ms (1: ms, 1000: seconds), returned in ms;
    null -> None; outside ``core.bounds`` (0 to one day) refused."""
    number = opt_number(value, path)
    if number is None:
        return None
    ms = number * per_unit_ms
    problem = latency_problem(ms)
    if problem:
        raise fail(path, problem if per_unit_ms == 1 else f"{problem} ms (from {number:g})")
    return ms


def cost_check(amount: Decimal, path: str) -> Decimal:
    """``amount`` (USD, finite, >= 0) when below ``core.bounds.COST_USD_LIMIT``, else refused."""
    problem = cost_problem(amount)
    if problem:
        raise fail(path, problem)
    return amount


def opt_number(value: Any, path: str) -> float | None:
    """An optional finite number >= 0 (latency, seconds or ms): null -> None; NaN refused."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise fail(path, f"expected a finite number >= 0 or null, got {show(value)}")
    return float(value)


def check_finite(value: Any, path: str) -> None:
    """Refuse a bare NaN/Infinity anywhere inside ``value`` (naming the innermost path)."""
    if isinstance(value, NON_FINITE):
        raise fail(path, "NaN/Infinity is not valid JSON")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_finite(v, f"{path}[{i}]")


def json_clean(value: Any) -> Any:
    """``value`` with NON_FINITE markers as null (for raw copies kept in JSON columns)."""
    if isinstance(value, NON_FINITE):
        return None
    if isinstance(value, dict):
        return {k: json_clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_clean(v) for v in value]
    return value


@dataclass
class GradeIn:
    """One grade to store: ``passed`` None means errored (``reason`` says why)."""

    grader: str
    passed: bool | None
    score: float | None
    reason: str
    gating: bool
    details: dict = field(default_factory=dict)


@dataclass
class TrialIn:
    """One trial to store; ``error`` non-empty makes it an errored trial (no grades)."""

    where: str
    case: CaseSpec
    attempt: int
    output: str
    error: str = ""
    latency_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: Decimal | None = None
    grades: list[GradeIn] = field(default_factory=list)
    raw: dict = field(default_factory=dict)
    # An agent's steps (``evals.trajectory.steps``, parsed) and final state; None when none.
    trajectory: list[dict] | None = None
    final_state: Any = None


def case_key_check(key: str, path: str) -> str:
    if not key.strip():
        raise fail(path, "a case key must not be empty")
    if len(key) > KEY_MAX:
        raise fail(path, f"case key longer than {KEY_MAX} characters ({len(key)})")
    return key


def trials_store(
    *,
    ctx: ImportContext,
    fmt: str,
    model: str,
    extra: dict,
    trials: list[TrialIn],
    graders: list[dict],
    planned: int | None = None,
    source_status: str = "",
) -> None:
    """Store ``trials`` as the new run ``ctx.run_name`` (format ``fmt``); ``planned`` and
    ``source_status`` as ``run_finish`` takes them; ``graders``: ``[{"key", "kind", "gating"}]``.
    Checks first, then writes. Raises ``DomainError`` for one key with two contents (naming both
    records) or a repeated (case, attempt)."""
    if not trials:
        raise DomainError("the file holds no results")
    specs: dict[str, tuple[CaseSpec, str]] = {}
    attempts: dict[tuple[str, int], str] = {}
    for t in trials:
        first = specs.setdefault(t.case.key, (t.case, t.where))
        if first[0].content_hash != t.case.content_hash:
            raise fail(t.where, f"case {t.case.key!r} has different content than {first[1]}")
        ident = (t.case.key, t.attempt)
        if ident in attempts:
            raise fail(
                t.where,
                f"case {t.case.key!r} attempt {t.attempt} already given by {attempts[ident]}",
            )
        attempts[ident] = t.where
    run = ctx.run_create(name=ctx.run_name, fmt=fmt, model=model, extra=extra)
    cases = ctx.cases_upsert([s for s, _ in specs.values()])
    ctx.cases_seen(cases.values())
    errored = 0
    for batch in chunked(trials, BATCH_SIZE):
        rows = [
            Trial(
                run=run,
                case=cases[t.case.key],
                attempt=t.attempt,
                status=Trial.Status.ERROR if t.error else Trial.Status.OK,
                output=t.output,
                error_message=t.error,
                raw_response=t.raw,
                latency_ms=t.latency_ms,
                input_tokens=t.input_tokens,
                output_tokens=t.output_tokens,
                cost_usd=t.cost_usd,
                trajectory=t.trajectory,
                final_state=t.final_state,
                finished_at=run.started_at,
            )
            for t in batch
        ]
        Trial.objects.bulk_create(rows)
        grades = [
            Grade(
                trial=row,
                grader=g.grader,
                grader_version=fmt,
                status=Grade.Status.OK if g.passed is not None else Grade.Status.ERROR,
                passed=g.passed,
                score=g.score,
                reason=g.reason,
                details=g.details,
                gating=g.gating,
            )
            for t, row in zip(batch, rows, strict=True)
            if not t.error
            for g in t.grades
        ]
        Grade.objects.bulk_create(grades)
        errored += sum(1 for t in batch if t.error)
        ctx.summary.trials += len(rows)
        ctx.summary.grades += len(grades)
    run_finish(
        run,
        trials=len(trials),
        errored=errored,
        graders=graders,
        trials_per_case=max(t.attempt for t in trials),
        planned=planned,
        source_status=source_status,
    )
