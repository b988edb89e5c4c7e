"""Tools an agent may call, declared as registered Python callables on the target
(``target.tools``, ``core.registry``; docs/agents.md), and how one call runs.

A tool is ``fn(state, **arguments)``; it may change ``state`` (the trial's JSON environment)
in place and returns any JSON value. Sync tools run in a worker thread, coroutines are
awaited, both under ``tool_timeout_s``. A call is all or nothing: the tool works on a deep
copy, kept only when it returns; a failure or timeout is a failed step fed back to the
model. A sync tool past its timeout cannot be stopped: it runs on, on a copy nobody reads.

The model is shown the function's ``tool_schema`` attribute, else its name, its docstring's
first paragraph and parameters from its signature after ``state`` (no default = required)."""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from core.registry import registry_get

MAX_TOOLS = 128
_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}


@dataclass(frozen=True)
class Tool:
    """A declared tool: ``name``, ``path`` as declared, the function, and its OpenAI ``schema``."""

    name: str
    path: str
    function: Callable[..., Any]
    schema: dict[str, Any]
    is_async: bool


@dataclass(frozen=True)
class ToolOutcome:
    """One tool call's end: ``ok``; ``content`` (the tool's JSON return value, or
    ``"ExceptionType: message"`` when it failed); ``state`` (the trial state after the call:
    the tool's copy when ok, else the state it was given); ``latency_ms``."""

    ok: bool
    content: Any
    state: dict[str, Any]
    latency_ms: float


def tools_declare(paths: Any, *, field: str = "target.tools") -> list[Tool]:
    """Look a list of registered tool names (``"package.module:function"``) up into tools.
    Raises ``DomainError`` naming ``target.tools[i]`` for a name that is not a registered
    tool, a ``tool_schema`` that is not an object, or a name declared twice; naming
    ``target.tools`` for a value that is not a non-empty list of at most ``MAX_TOOLS``."""
    if not isinstance(paths, list) or not paths:
        raise DomainError("expected a non-empty list of registered tools' names", field=field)
    if len(paths) > MAX_TOOLS:
        raise DomainError(f"at most {MAX_TOOLS} tools, got {len(paths)}", field=field)
    tools: list[Tool] = []
    seen: set[str] = set()
    for index, path in enumerate(paths):
        where = f"{field}[{index}]"
        function = registry_get(name=path, kind="tool", field=where)
        name = getattr(function, "__name__", "") or path.rpartition(":")[2].rpartition(".")[2]
        if name in seen:
            raise DomainError(f"a second tool named {name!r}", field=where)
        seen.add(name)
        tools.append(
            Tool(
                name=name,
                path=path,
                function=function,
                schema=tool_schema(function, name=name, field=where),
                is_async=inspect.iscoroutinefunction(function),
            )
        )
    return tools


def tool_schema(function: Callable[..., Any], *, name: str, field: str) -> dict[str, Any]:
    """The OpenAI function-calling entry for ``function``. Raises ``DomainError`` naming ``field``
    for a ``tool_schema`` that is not an object or whose ``parameters`` is not a JSON-schema
    object."""
    declared = getattr(function, "tool_schema", None)
    if declared is not None:
        if not isinstance(declared, dict):
            raise DomainError("the function's tool_schema must be an object", field=field)
        parameters = declared.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise DomainError("tool_schema.parameters must be an object", field=field)
        description = str(declared.get("description") or _doc_summary(function))
    else:
        parameters = _signature_parameters(function)
        description = _doc_summary(function)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _doc_summary(function: Callable[..., Any]) -> str:
    doc = inspect.getdoc(function) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _signature_parameters(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        params = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params[1:]:  # the first is the state
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        kind = _JSON_TYPES.get(param.annotation)
        properties[param.name] = {"type": kind} if kind else {}
        if param.default is param.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def environment_build(
    builder: Callable[..., Any] | None, case: Any, *, field: str = "target.environment"
) -> dict[str, Any]:
    """A trial's starting state: ``builder(case)`` as a fresh JSON object, or ``{}`` with no
    builder. Raises ``ValueError`` naming ``field`` for a non-object; the builder's own
    exception propagates (the loop makes either an errored trial)."""
    if builder is None:
        return {}
    state = builder(case)
    if not isinstance(state, dict):
        raise ValueError(f"{field} must return a JSON object, got {type(state).__name__}")
    try:
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} returned a state that is not JSON: {exc}") from exc


async def tool_run(
    tool: Tool,
    state: dict[str, Any],
    arguments: dict[str, Any],
    *,
    timeout_s: float,
    executor: Executor | None = None,
) -> ToolOutcome:
    """Call ``tool`` on a deep copy of ``state`` within ``timeout_s`` seconds; a sync tool runs on
    ``executor``. Never raises for the tool's own failure (an ``Exception``, ``SystemExit``,
    a timeout, a non-JSON return)."""
    working = copy.deepcopy(state)
    started = time.perf_counter()
    try:
        if tool.is_async:
            value = await asyncio.wait_for(tool.function(working, **arguments), timeout_s)
        else:
            call = functools.partial(tool.function, working, **arguments)
            running = asyncio.get_running_loop().run_in_executor(executor, call)
            value = await asyncio.wait_for(running, timeout_s)
        content = _json_value(value)
    except TimeoutError:
        return ToolOutcome(
            ok=False,
            content=f"TimeoutError: {tool.name} did not return within {timeout_s:g} s",
            state=state,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
    # The tool's failure is a failed step the model sees, never a crash of the trial.
    except (Exception, SystemExit) as exc:
        return ToolOutcome(
            ok=False,
            content=f"{type(exc).__name__}: {exc}",
            state=state,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
    return ToolOutcome(
        ok=True, content=content, state=working, latency_ms=(time.perf_counter() - started) * 1000
    )


def _json_value(value: Any) -> Any:
    """``value`` as a plain JSON copy; ``TypeError`` for a value that is not JSON."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the tool returned a value that is not JSON: {exc}") from exc


def tool_content_text(content: Any) -> str:
    """A tool result as message content: a string as is, other JSON compact."""
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"))
