"""The ``trajectory`` grader: the path an agent took, checked against constraints (options
and the names a CEL check reads: docs/agents.md).

Pass when every constraint holds; fail with every violation in the reason. Errored when it
cannot judge: no trajectory, a broken or non-boolean check, or no violation but a cap left
unchecked because a model step (assistant message or tool call) states no tokens or cost
(unknown is not zero). A check reading a result the agent never fetched is a violation.

``details``: ``violations`` (``[{"rule", "text", "group"}]``), ``unchecked``, ``steps``,
``tool_calls``, ``tools`` (the first 50 names) and ``group`` (the reason without values)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError

from core.decimals import decimal_plain
from core.errors import DomainError, value_shown
from evals.grading.agent.data import AgentData, AgentOutcome
from evals.grading.contract.config import CEL_MAX_CHARS, cel_environment
from evals.trajectory.steps import trajectory_totals

OPTIONS = (
    "required",
    "forbidden",
    "order",
    "before",
    "arguments",
    "max_steps",
    "max_tokens",
    "max_cost_usd",
)
_CHECK_FIELDS = {"tool", "check", "name"}
_RESERVED = {"args", "results", "calls", "call_index"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CEL_KEYWORDS = {"true", "false", "null", "in", "as", "break", "const", "continue", "else"}


def _names(value: Any, where: str, *, non_empty: bool = True) -> list[str]:
    if not isinstance(value, list) or (non_empty and not value):
        raise DomainError("expected a non-empty list of tool names", field=where)
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name:
            raise DomainError("expected a tool name (a non-empty string)", field=f"{where}[{i}]")
    return value


def _cap(value: Any, where: str, *, integer: bool) -> None:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value < 0:
        kind = "a whole number" if integer else "a number"
        raise DomainError(f"expected {kind} >= 0, got {value_shown(value)}", field=where)


@lru_cache(maxsize=256)
def _program(source: str) -> Any:
    cel = cel_environment()
    return cel.program(cel.compile(source))


def trajectory_parse(config: dict, where: str) -> None:
    """Check a ``trajectory`` config: names are non-empty strings, ``before`` holds pairs, every
    check compiles as CEL (at most ``CEL_MAX_CHARS``), caps are finite and >= 0, at least one
    constraint. Raises ``DomainError`` naming ``<where>.<option>``."""
    for name in config:
        if name not in OPTIONS:
            raise DomainError(
                f"unknown option for trajectory (known: {sorted(OPTIONS)})",
                field=f"{where}.{name}",
            )
    if not config:
        raise DomainError(f"give at least one constraint ({', '.join(OPTIONS)})", field=where)
    for name in ("required", "forbidden", "order"):
        if name in config:
            _names(config[name], f"{where}.{name}")
    both = set(config.get("required", [])) & set(config.get("forbidden", []))
    if both:
        raise DomainError(
            f"both required and forbidden: {sorted(both)}", field=f"{where}.forbidden"
        )
    if "before" in config:
        pairs = config["before"]
        if not isinstance(pairs, list) or not pairs:
            raise DomainError(
                "expected a non-empty list of [first, then] pairs", field=f"{where}.before"
            )
        for i, pair in enumerate(pairs):
            _names(pair, f"{where}.before[{i}]")
            if len(pair) != 2 or pair[0] == pair[1]:
                raise DomainError(
                    "expected a pair of two different tool names [first, then]",
                    field=f"{where}.before[{i}]",
                )
    if "arguments" in config:
        checks = config["arguments"]
        if not isinstance(checks, list) or not checks:
            raise DomainError("expected a non-empty list of checks", field=f"{where}.arguments")
        for i, check in enumerate(checks):
            at = f"{where}.arguments[{i}]"
            if not isinstance(check, dict):
                raise DomainError('expected {"tool", "check", "name"?}', field=at)
            for key in check:
                if key not in _CHECK_FIELDS:
                    raise DomainError("unknown field (tool, check, name)", field=f"{at}.{key}")
            for key in ("tool", "check"):
                if not isinstance(check.get(key), str) or not check[key].strip():
                    raise DomainError("required: a non-empty string", field=f"{at}.{key}")
            if "name" in check and not isinstance(check["name"], str):
                raise DomainError("expected a string", field=f"{at}.name")
            if len(check["check"]) > CEL_MAX_CHARS:
                raise DomainError(f"at most {CEL_MAX_CHARS} characters", field=f"{at}.check")
            try:
                _program(check["check"])
            except (CELParseError, RecursionError, ValueError) as exc:
                raise DomainError(
                    f"invalid CEL: {str(exc).splitlines()[0]}", field=f"{at}.check"
                ) from exc
    if "max_steps" in config:
        _cap(config["max_steps"], f"{where}.max_steps", integer=True)
    if "max_tokens" in config:
        _cap(config["max_tokens"], f"{where}.max_tokens", integer=True)
    if "max_cost_usd" in config:
        _cap(config["max_cost_usd"], f"{where}.max_cost_usd", integer=False)


@dataclass(frozen=True)
class _Call:
    """A tool call at ``step``: per-tool ``index``, ``arguments``, prior results and calls."""

    step: int
    name: str
    index: int
    arguments: dict
    results: dict
    calls: dict


def _content(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _calls(steps: list[dict]) -> list[_Call]:
    """The tool calls of ``steps`` with what the agent had seen before each one."""
    out: list[_Call] = []
    results: dict[str, Any] = {}
    calls: dict[str, dict] = {}
    name_of_id: dict[str, str] = {}
    counts: dict[str, int] = {}
    last_call = None
    for i, step in enumerate(steps):
        kind = step.get("kind")
        if kind == "tool_call":
            name = step["name"]
            counts[name] = counts.get(name, 0) + 1
            args = step.get("arguments") or {}
            out.append(_Call(i, name, counts[name], args, dict(results), dict(calls)))
            calls[name] = args
            if step.get("id"):
                name_of_id[step["id"]] = name
            last_call = name
        elif kind == "tool_result" and step.get("status", "ok") == "ok":
            name = step.get("name") or name_of_id.get(step.get("id") or "") or last_call
            if name:
                results[name] = _content(step.get("content"))
    return out


def _numbers_as_doubles(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _numbers_as_doubles(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_doubles(v) for v in value]
    return value


class _CannotJudge(Exception):
    """A check that is broken (not the agent's fault): the grade is errored."""


NAME_CHARS = 80  # a tool name from a trajectory (untrusted), as a reason quotes it


def _name(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _args_text(args: dict) -> str:
    text = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:119] + "…"


def _check_call(check: dict, call: _Call) -> dict | None:
    """A violation of ``check`` on ``call`` (None when it holds); raises ``_CannotJudge``."""
    name = check.get("name") or check["check"]
    activation = {
        "args": call.arguments,
        "results": call.results,
        "calls": call.calls,
        "call_index": call.index,
    }
    if _IDENT.match(call.name) and call.name not in _RESERVED | _CEL_KEYWORDS:
        activation[call.name] = call.arguments
    try:
        cel = {k: celpy.json_to_cel(_numbers_as_doubles(v)) for k, v in activation.items()}
    except Exception as exc:  # noqa: BLE001 - a value CEL cannot hold
        raise _CannotJudge(
            f"call {call.index} of `{_name(call.name)}` cannot be read by CEL: {str(exc)[:200]}"
        ) from exc
    where = f"call {call.index} of `{_name(call.name)}` (step {call.step + 1})"
    try:
        value = _program(check["check"]).evaluate(cel)
    except Exception as exc:  # noqa: BLE001 - celpy raises several kinds
        message = str(exc.args[0]) if exc.args else type(exc).__name__
        missing = re.search(r"no such (?:member in mapping|key): '([^']*)'", message)
        if missing:
            return {
                "rule": "arguments",
                "text": f"argument check `{name}` could not be checked on {where}: "
                f"`{missing.group(1)}` was not there (no such result or argument before it)",
                "group": f"argument check `{name}` unverifiable on `{_name(call.name)}`",
            }
        raise _CannotJudge(
            f"argument check `{name}` broke on {where}: {message.splitlines()[0][:200]}"
        ) from exc
    if not isinstance(value, celtypes.BoolType | bool):
        raise _CannotJudge(
            f"argument check `{name}` gave {repr(value)[:80]}, not a boolean, on {where}"
        )
    if bool(value):
        return None
    return {
        "rule": "arguments",
        "text": f"argument check `{name}` false on {where}, arguments {_args_text(call.arguments)}",
        "group": f"argument check `{name}` false on `{_name(call.name)}`",
    }


def _tool_violations(config: dict, calls: list[_Call]) -> list[dict]:
    names = [c.name for c in calls]
    out = []
    for tool in config.get("required", []):
        if tool not in names:
            text = f"required tool `{tool}` never called"
            out.append({"rule": "required", "text": text, "group": text})
    for tool in config.get("forbidden", []):
        steps = [c.step + 1 for c in calls if c.name == tool]
        if steps:
            where = ", ".join(map(str, steps[:5])) + (" …" if len(steps) > 5 else "")
            out.append(
                {
                    "rule": "forbidden",
                    "text": f"forbidden tool `{tool}` called "
                    f"(step{'s' if len(steps) > 1 else ''} {where})",
                    "group": f"forbidden tool `{tool}` called",
                }
            )
    for first, then in config.get("before", []):
        seen_first = False
        for c in calls:
            if c.name == first:
                seen_first = True
            elif c.name == then and not seen_first:
                never = "" if first in names else f" (`{first}` never called)"
                out.append(
                    {
                        "rule": "before",
                        "text": f"forbidden tool `{then}` called before `{first}` "
                        f"(step {c.step + 1}){never}",
                        "group": f"forbidden tool `{then}` before `{first}`",
                    }
                )
                break
    order = config.get("order")
    if order:
        at = 0
        for name in names:
            if at < len(order) and name == order[at]:
                at += 1
        if at < len(order):
            arrow = " → ".join(f"`{t}`" for t in order)
            done = " → ".join(f"`{t}`" for t in order[:at])
            got = ", ".join(f"`{_name(n)}`" for n in names[:12]) or "no tool call"
            missing = f"`{order[at]}` never called" + (f" after {done}" if at else "")
            out.append(
                {
                    "rule": "order",
                    "text": f"required order {arrow} not followed: {missing} (called: {got})",
                    "group": f"required order {arrow} not followed",
                }
            )
    return out


def _usd(value: float) -> str:
    """Dollars to six significant digits in plain decimals ("$0.0000004", never "$4e-07":
    ``core.decimals.decimal_plain``), enough to tell a cost from the cap it passed."""
    return "$" + decimal_plain(Decimal(f"{value:.6g}"))


def _cap_check(label: str, known: float | None, unknown: int, steps: int, cap: float, unit: str):
    """(violation or None, unchecked text or None) for a cap over a per-step metric."""
    show = _usd if unit == "USD" else (lambda v: f"{int(v)}")
    if known is not None and known > cap:
        more = f" (at least: {unknown} of {steps} model steps state none)" if unknown else ""
        text = f"{label} {show(known)} over the maximum {show(cap)}{more}"
        return {"rule": f"max_{label}", "text": text, "group": f"{label} over the maximum"}, None
    if unknown:
        part = f"the known part is {show(known)}" if known is not None else "no step states it"
        return None, (
            f"max {label} {show(cap)} not checked: {unknown} of {steps} model steps state no "
            f"{label} (unknown is not zero; {part})"
        )
    return None, None


def _is_model_step(step: dict) -> bool:
    """A step the model produced (an assistant message or a tool call): the steps that
    should state tokens and cost. Tool results and user or system messages need not."""
    kind = step.get("kind")
    return kind == "tool_call" or (kind == "message" and step.get("role") == "assistant")


def trajectory_grade(config: dict, agent: AgentData) -> AgentOutcome:
    """Grade ``agent.trajectory`` against ``config`` (module docstring)."""
    steps = agent.trajectory
    if steps is None:
        return AgentOutcome(
            None,
            "no trajectory: the target returned none, so the path cannot be judged",
            {"group": "no trajectory"},
        )
    calls = _calls(steps)
    violations = _tool_violations(config, calls)
    try:
        for check in config.get("arguments", []):
            for call in calls:
                if call.name == check["tool"]:
                    found = _check_call(check, call)
                    if found:
                        violations.append(found)
    except _CannotJudge as exc:
        return AgentOutcome(None, str(exc), {"group": "argument check broke"})
    totals = trajectory_totals(steps)
    model = [s for s in steps if _is_model_step(s)]
    unchecked: list[str] = []
    if "max_steps" in config and totals.steps > config["max_steps"]:
        text = f"{totals.steps} steps, over the maximum {config['max_steps']}"
        violations.append({"rule": "max_steps", "text": text, "group": "steps over the maximum"})
    if "max_tokens" in config:
        unknown = sum(
            1 for s in model if s.get("input_tokens") is None and s.get("output_tokens") is None
        )
        known = None
        if totals.input_tokens is not None or totals.output_tokens is not None:
            known = (totals.input_tokens or 0) + (totals.output_tokens or 0)
        v, u = _cap_check("tokens", known, unknown, len(model), config["max_tokens"], "tokens")
        violations += [v] if v else []
        unchecked += [u] if u else []
    if "max_cost_usd" in config:
        unknown = sum(1 for s in model if s.get("cost_usd") is None)
        v, u = _cap_check(
            "cost", totals.cost_usd, unknown, len(model), config["max_cost_usd"], "USD"
        )
        violations += [v] if v else []
        unchecked += [u] if u else []
    details = {
        "violations": violations,
        "unchecked": unchecked,
        "steps": totals.steps,
        "tool_calls": totals.tool_calls,
        "tools": list(totals.tools[:50]),
    }
    if violations:
        reason = "; ".join(v["text"] for v in violations)
        if unchecked:
            reason += "; also " + "; ".join(unchecked)
        group = "; ".join(dict.fromkeys(v["group"] for v in violations))
        return AgentOutcome(False, reason, {**details, "group": group})
    if unchecked:
        return AgentOutcome(
            None, "cannot judge: " + "; ".join(unchecked), {**details, "group": "cap unknown"}
        )
    return AgentOutcome(
        True,
        f"every trajectory constraint held ({totals.steps} steps, {totals.tool_calls} tool calls)",
        details,
    )
