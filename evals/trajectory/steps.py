"""The shape of a trajectory: an ordered list of steps, each one of

- ``{"kind": "message", "role": "assistant"|"user"|"system", "content": str}``;
- ``{"kind": "tool_call", "name": str, "arguments": object, "id": str?}``;
- ``{"kind": "tool_result", "name": str?, "id": str?, "content": str|JSON,
  "status": "ok"|"error"}``;

each with optional ``input_tokens``, ``output_tokens``, ``latency_ms`` and ``cost_usd`` (USD),
non-negative, null when unknown. ``trajectory_parse`` refuses bad input from outside with a
``DomainError``; ``trajectory_clean`` repairs a pipeline's own steps (``core.text``) and
raises ``TrajectoryError`` (an errored trial) for a shape it cannot store."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from core.errors import DomainError, value_shown
from core.text import unstorable_path, unstorable_replace

STEP_KINDS = ("message", "tool_call", "tool_result")
MESSAGE_ROLES = ("assistant", "user", "system")
RESULT_STATUSES = ("ok", "error")
MAX_STEPS = 10_000
_METRICS = ("input_tokens", "output_tokens", "latency_ms", "cost_usd")
_ALLOWED = {
    "message": {"kind", "role", "content", *_METRICS},
    "tool_call": {"kind", "name", "arguments", "id", *_METRICS},
    "tool_result": {"kind", "name", "id", "content", "status", *_METRICS},
}


class TrajectoryError(ValueError):
    """A trajectory that cannot be stored; ``field``: the bad value's path."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def _number(value: Any, where: str, *, integer: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise TrajectoryError(f"expected a number or null, got {value_shown(value)}", field=where)
    if integer and not isinstance(value, int):
        raise TrajectoryError(f"expected a whole number, got {value_shown(value)}", field=where)
    if isinstance(value, float) and not math.isfinite(value):
        raise TrajectoryError(f"expected a finite number, got {value_shown(value)}", field=where)
    if value < 0:
        raise TrajectoryError(f"expected a number >= 0, got {value_shown(value)}", field=where)


def _step_check(step: Any, where: str) -> dict:
    if not isinstance(step, dict):
        raise TrajectoryError(f"a step is an object, got {type(step).__name__}", field=where)
    kind = step.get("kind")
    if kind not in STEP_KINDS:
        raise TrajectoryError(
            f"unknown step kind {kind!r} ({', '.join(STEP_KINDS)})", field=f"{where}.kind"
        )
    extra = sorted(set(step) - _ALLOWED[kind])
    if extra:
        raise TrajectoryError(
            f"unknown field for a {kind} step (allowed: {', '.join(sorted(_ALLOWED[kind]))})",
            field=f"{where}.{extra[0]}",
        )
    if kind == "message":
        if step.get("role", "assistant") not in MESSAGE_ROLES:
            raise TrajectoryError(
                f"role is one of {', '.join(MESSAGE_ROLES)}", field=f"{where}.role"
            )
        if not isinstance(step.get("content", ""), str):
            raise TrajectoryError("content is a string", field=f"{where}.content")
    elif kind == "tool_call":
        name = step.get("name")
        if not isinstance(name, str) or not name:
            raise TrajectoryError("a tool call has a non-empty name", field=f"{where}.name")
        if not isinstance(step.get("arguments", {}), dict):
            raise TrajectoryError("arguments are a JSON object", field=f"{where}.arguments")
    else:
        if step.get("status", "ok") not in RESULT_STATUSES:
            raise TrajectoryError(
                f"status is one of {', '.join(RESULT_STATUSES)}", field=f"{where}.status"
            )
        if "name" in step and not isinstance(step["name"], str):
            raise TrajectoryError("name is a string", field=f"{where}.name")
    if "id" in step and not isinstance(step["id"], str):
        raise TrajectoryError("id is a string", field=f"{where}.id")
    for metric in _METRICS:
        _number(step.get(metric), f"{where}.{metric}", integer=metric.endswith("tokens"))
    normal = dict(step)
    if kind == "message":
        normal.setdefault("role", "assistant")
        normal.setdefault("content", "")
    elif kind == "tool_call":
        normal.setdefault("arguments", {})
    else:
        normal.setdefault("status", "ok")
        normal.setdefault("content", "")
    for metric in _METRICS:
        if isinstance(normal.get(metric), Decimal):
            normal[metric] = float(normal[metric])
    return normal


def _steps_check(value: Any, field: str) -> list[dict]:
    if not isinstance(value, list):
        raise TrajectoryError(
            f"a trajectory is a list of steps, got {type(value).__name__}", field=field
        )
    if len(value) > MAX_STEPS:
        raise TrajectoryError(f"more than {MAX_STEPS} steps ({len(value)})", field=field)
    return [_step_check(step, f"{field}[{i}]") for i, step in enumerate(value)]


def _json_check(value: Any, field: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TrajectoryError(f"not JSON: {exc}", field=field) from exc


def trajectory_parse(
    value: Any, *, field: str = "trajectory", record: str | None = None
) -> list[dict] | None:
    """A trajectory from outside: null -> None, else the steps with defaults filled in. Raises
    ``DomainError`` (``invalid``) naming the step's field (``trajectory[3].arguments``) and
    ``record`` for a bad shape, more than ``MAX_STEPS`` steps, non-JSON or unstorable text."""
    if value is None:
        return None
    try:
        steps = _steps_check(value, field)
        _json_check(steps, field)
    except TrajectoryError as exc:
        raise DomainError(str(exc), field=exc.field, record=record) from exc
    where = unstorable_path(steps, field)
    if where is not None:
        raise DomainError(
            "holds U+0000 (NUL) or an unpaired surrogate, which the database cannot store",
            field=where,
            record=record,
        )
    return steps


def final_state_parse(value: Any, *, field: str = "final_state", record: str | None = None) -> Any:
    """A final (or goal) state from outside: any JSON value, null for none. Raises
    ``DomainError`` naming ``field`` for a value that is not JSON (NaN included) or holds
    unstorable text."""
    try:
        _json_check(value, field)
    except TrajectoryError as exc:
        raise DomainError(str(exc), field=exc.field, record=record) from exc
    where = unstorable_path(value, field)
    if where is not None:
        raise DomainError(
            "holds U+0000 (NUL) or an unpaired surrogate, which the database cannot store",
            field=where,
            record=record,
        )
    return value


def trajectory_clean(value: Any, *, field: str = "trajectory") -> tuple[list[dict] | None, int]:
    """A pipeline's own trajectory: (steps with defaults and unstorable characters replaced by
    U+FFFD, how many replaced); None -> (None, 0). Raises ``TrajectoryError`` for a shape it
    cannot store."""
    if value is None:
        return None, 0
    steps = _steps_check(value, field)
    _json_check(steps, field)
    cleaned, replaced = unstorable_replace(steps)
    return cleaned, replaced


def final_state_clean(value: Any, *, field: str = "final_state") -> tuple[Any, int]:
    """A pipeline's own final state: (the value with unstorable characters replaced, how
    many). Raises ``TrajectoryError`` for a value that is not JSON."""
    _json_check(value, field)
    return unstorable_replace(value)


@dataclass(frozen=True)
class TrajectoryTotals:
    """What a trajectory adds up to: ``steps``, ``tool_calls``, ``tool_errors``, ``tools`` (names
    in call order); ``input_tokens``, ``output_tokens`` and ``cost_usd`` (USD) summed over the
    steps that state them, None when none does; ``cost_unknown``: model calls stating no cost.
    A model call's metrics sit on its first step, so a call is a step stating tokens."""

    steps: int
    tool_calls: int
    tool_errors: int
    tools: tuple[str, ...]
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    cost_unknown: int


def trajectory_totals(steps: list[dict] | None) -> TrajectoryTotals:
    """Totals of a parsed trajectory; an absent one totals zero steps, tokens and cost unknown."""
    steps = steps or []
    tools = tuple(s["name"] for s in steps if s.get("kind") == "tool_call")
    tool_errors = sum(
        1 for s in steps if s.get("kind") == "tool_result" and s.get("status") == "error"
    )

    def total(metric: str) -> tuple[float | None, int]:
        known = [s[metric] for s in steps if s.get(metric) is not None]
        unknown = sum(1 for s in steps if s.get(metric) is None)
        return (sum(known) if known else None), unknown

    input_tokens, _ = total("input_tokens")
    output_tokens, _ = total("output_tokens")
    cost, _ = total("cost_usd")
    cost_unknown = sum(
        1
        for s in steps
        if s.get("cost_usd") is None
        and (s.get("input_tokens") is not None or s.get("output_tokens") is not None)
    )
    return TrajectoryTotals(
        steps=len(steps),
        tool_calls=len(tools),
        tool_errors=tool_errors,
        tools=tools,
        input_tokens=None if input_tokens is None else int(input_tokens),
        output_tokens=None if output_tokens is None else int(output_tokens),
        cost_usd=None if cost is None else float(cost),
        cost_unknown=cost_unknown,
    )
