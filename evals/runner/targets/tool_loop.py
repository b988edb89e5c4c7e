"""The tool loop of a model target: the model calls tools until it answers.

A target config with ``tools`` runs one loop per trial (config, caps and error kinds:
docs/agents.md; tools: ``evals.runner.targets.tools``)::

    {"kind": "openai", "base_url": ..., "model": ..., "prompt_template": "$input",
     "tools": ["shop.tools:lookup_order", "shop.tools:issue_refund"],
     "environment": "shop.tools:environment",   # optional: fn(case) -> the starting state
     "max_steps": 20,          # model calls per trial (default 20)
     "max_cost_usd": 0.05,     # optional: spend per trial, USD
     "tool_timeout_s": 30}     # per tool call, seconds (default 30)

A reply's text and tool calls become steps (``evals.trajectory.steps``), the model call's
tokens, latency (ms) and cost (USD, null when unknown) on its first step. A reply without
tool calls is the answer, the state its ``final_state``. A cap (``step_cap``, ``cost_cap``,
a call of unknown cost under a cost cap, a failed call) ends the trial errored, keeping its
steps; a failing tool is a failed step the model sees. One loop for every provider protocol
(``provider``): its wire shapes (tools, tool calls, results) are
``evals.runner.targets.tool_protocols``'.

Model output and tool results are untrusted data, never executed or rendered. Text sent back
has U+0000 and lone surrogates replaced (UTF-8 cannot encode them); the steps keep the
original."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import DatabaseError, connection

from core.errors import DomainError
from core.money import usd_text
from core.registry import registry_get
from core.text import unstorable_replace
from evals.runner.targets.base import CaseInput, TargetResult
from evals.runner.targets.tool_protocols import TOOL_PROTOCOLS, ToolResult
from evals.runner.targets.tools import (
    Tool,
    environment_build,
    tool_content_text,
    tool_run,
    tools_declare,
)
from evals.trajectory.limits import COST_CAP, STEP_CAP, limit_error
from providers.usage import ZERO, Usage, usage_of, usage_tokens

# The fields of a target config that belong to the tool loop.
TOOL_LOOP_FIELDS = frozenset(
    {"tools", "environment", "max_steps", "max_cost_usd", "tool_timeout_s"}
)
DEFAULT_MAX_STEPS = 20
MAX_MAX_STEPS = 500
DEFAULT_TOOL_TIMEOUT_S = 30.0

Pricer = Callable[[str | None], Awaitable[Any]]
Send = Callable[[dict[str, Any]], Awaitable[TargetResult]]


@dataclass(frozen=True)
class ToolLoopConfig:
    """The tool loop's part of a target config (module docstring): the declared ``tools``,
    the ``environment`` builder (or None), ``max_steps`` (model calls), ``max_cost_usd``
    (Decimal USD, or None for no cap) and ``tool_timeout_s`` (seconds)."""

    tools: tuple[Tool, ...]
    environment: Callable[..., Any] | None
    max_steps: int = DEFAULT_MAX_STEPS
    max_cost_usd: Decimal | None = None
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S

    @classmethod
    def parse(cls, config: dict) -> ToolLoopConfig | None:
        """The loop's config from a target config, None when it declares no ``tools`` (a
        plain single call). Raises ``DomainError`` naming the field (``target.tools[2]``,
        ``target.max_steps``, ...) when a loop field is set without tools, or is invalid."""
        if config.get("tools") is None:
            stray = sorted(TOOL_LOOP_FIELDS & {k for k, v in config.items() if v is not None})
            if stray:
                raise DomainError("only with target.tools", field=f"target.{stray[0]}")
            return None
        tools = tools_declare(config["tools"])
        environment = config.get("environment")
        builder = None
        if environment is not None:
            builder = registry_get(name=environment, kind="environment", field="target.environment")
        max_steps = config.get("max_steps", DEFAULT_MAX_STEPS)
        if (
            isinstance(max_steps, bool)
            or not isinstance(max_steps, int)
            or not 1 <= max_steps <= MAX_MAX_STEPS
        ):
            raise DomainError(
                f"expected an integer from 1 to {MAX_MAX_STEPS}, got {max_steps!r:.40}",
                field="target.max_steps",
            )
        return cls(
            tools=tuple(tools),
            environment=builder,
            max_steps=max_steps,
            max_cost_usd=_positive(config, "max_cost_usd", None),
            tool_timeout_s=float(_positive(config, "tool_timeout_s", DEFAULT_TOOL_TIMEOUT_S)),
        )


def _positive(config: dict, name: str, default: Any) -> Any:
    value = config.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise DomainError(f"expected a number > 0, got {value!r:.40}", field=f"target.{name}")
    if value != value or value in (float("inf"),):
        raise DomainError("expected a finite number", field=f"target.{name}")
    return Decimal(str(value))


def _price_lookup_closing(model: str | None) -> Any:
    """``price_lookup`` on this worker thread's own connection, closed after (the loop
    runs on the call pool's thread, which must not hold a connection). A database error
    leaves the price unknown."""
    from providers.pricing import price_lookup  # noqa: PLC0415 - needs the app registry

    try:
        return price_lookup(model)
    except DatabaseError:
        return None
    finally:
        connection.close()


async def database_price(model: str | None) -> Any:
    """The model's ``Price`` or None, looked up on a worker thread: the loop's default pricer."""
    return await asyncio.to_thread(_price_lookup_closing, model)


class _Prices:
    """Prices by model name for one target instance: each name looked up once."""

    def __init__(self, pricer: Pricer) -> None:
        self._pricer = pricer
        self._known: dict[str | None, Any] = {}

    async def cost(self, model: str | None, result: TargetResult) -> Decimal | None:
        from providers.pricing import usage_cost  # noqa: PLC0415 - needs the app registry

        if model not in self._known:
            self._known[model] = await self._pricer(model)
        return usage_cost(self._known[model], usage_of(result), model=model).total_usd


@dataclass
class _Trial:
    """What one trial's loop has made so far."""

    steps: list[dict]
    state: dict[str, Any]
    messages: list[dict]
    spent: Decimal = Decimal(0)
    cost_known: bool = True
    usage: Usage = ZERO  # the calls' token classes summed (``providers.usage``)
    attempts: int = 0
    model_calls: int = 0
    model: str | None = None
    last_raw: Any = None


class ToolLoop:
    """Runs the loop for one target instance (module docstring). ``send`` is the target's
    ``call_body`` (retries, error kinds, storable text); ``pricer`` looks a model's price up
    (default ``database_price``); ``executor`` runs sync tools and the environment builder
    (one thread per call in flight, so a tool's timeout never counts a wait for a thread);
    ``protocol``: the provider protocol spoken (``tool_protocols.TOOL_PROTOCOLS``)."""

    def __init__(
        self,
        config: ToolLoopConfig,
        *,
        send: Send,
        model: str,
        executor: Executor,
        pricer: Pricer | None = None,
        protocol: str = "openai",
    ) -> None:
        self.config = config
        self._protocol = TOOL_PROTOCOLS[protocol]
        self._send = send
        self._model = model
        self._executor = executor
        self._prices = _Prices(pricer or database_price)
        self._by_name = {tool.name: tool for tool in config.tools}

    async def run(self, case: CaseInput, first_body: dict[str, Any]) -> TargetResult:
        """One trial: the loop from ``first_body`` (``model``, ``messages``, settings; the
        ``tools`` are added here) to the model's answer or a cap. Never raises for the
        model's, the tools' or the environment's failures: they are errored results or
        failed steps."""
        started = time.perf_counter()
        body = {**first_body, "tools": self._protocol.declarations(self.config.tools)}
        try:
            state = await asyncio.get_running_loop().run_in_executor(
                self._executor, environment_build, self.config.environment, case
            )
        except (Exception, SystemExit) as exc:
            return TargetResult(
                output="",
                error=f"environment: {type(exc).__name__}: {exc}",
                error_kind="environment",
                model=self._model,
                request=body,
                trajectory=[],
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        trial = _Trial(steps=[], state=state, messages=list(body["messages"]), model=self._model)
        output, error, error_kind = await self._turns(trial, body)
        return TargetResult(
            output=output,
            raw_response={"model_calls": trial.model_calls, "last_reply": trial.last_raw},
            latency_ms=(time.perf_counter() - started) * 1000,
            **usage_tokens(trial.usage),
            model=trial.model,
            error=error,
            attempts=trial.attempts,
            error_kind=error_kind,
            request=body,
            trajectory=trial.steps,
            final_state=trial.state,
        )

    async def _turns(self, trial: _Trial, body: dict) -> tuple[str, str | None, str | None]:
        """The turns of one trial: (output, error, error kind)."""
        cap = self.config.max_cost_usd
        while True:
            result = await self._send({**body, "messages": trial.messages})
            trial.model_calls += 1
            trial.attempts += result.attempts
            trial.last_raw = result.raw_response
            if not result.ok:
                return "", result.error, result.error_kind
            trial.model = result.model or trial.model
            content, calls = self._protocol.reply(result)
            cost = await self._prices.cost(result.model or self._model, result)
            self._record_call(trial, result, content, calls, cost)
            if cap is not None and cost is None:
                reason = (
                    f"cost cap: the cost of model call {trial.model_calls} is unknown "
                    f"(model {trial.model!r} has no price, or the reply gave no token counts), "
                    f"so max_cost_usd {usd_text(cap)} cannot be held"
                )
                return self._unrun(trial, calls, reason, COST_CAP)
            if cap is not None and trial.spent > cap:
                reason = (
                    f"cost cap: {usd_text(trial.spent)} spent after {trial.model_calls} model "
                    f"calls (max_cost_usd {usd_text(cap)})"
                )
                return self._unrun(trial, calls, reason, COST_CAP)
            if not calls:
                return content or "", None, None
            if trial.model_calls >= self.config.max_steps:
                reason = (
                    f"step cap: the model still called tools after {trial.model_calls} model "
                    f"calls (max_steps {self.config.max_steps})"
                )
                return self._unrun(trial, calls, reason, STEP_CAP)
            trial.messages.append(
                _sendable(self._protocol.assistant_message(result, content, calls))
            )
            results = [await self._tool_call(trial, call) for call in calls]
            trial.messages.extend(
                _sendable(message) for message in self._protocol.results_messages(results)
            )

    def _record_call(
        self,
        trial: _Trial,
        result: TargetResult,
        content: str | None,
        calls: list[dict],
        cost: Decimal | None,
    ) -> None:
        """Steps for one reply; the call's metrics on its first step; totals on the trial."""
        first = len(trial.steps)
        if content:
            trial.steps.append({"kind": "message", "role": "assistant", "content": content})
        for call in calls:
            step = {"kind": "tool_call", "name": call["name"], "arguments": call["arguments"]}
            step["id"] = call["id"]
            trial.steps.append(step)
        trial.steps[first].update(
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            latency_ms=result.latency_ms,
            cost_usd=None if cost is None else float(cost),
        )
        if cost is None:
            trial.cost_known = False
        else:
            trial.spent += cost
        trial.usage = trial.usage.plus(usage_of(result))

    async def _tool_call(self, trial: _Trial, call: dict) -> ToolResult:
        """Run one call on the trial's state; record its result step; what is sent back."""
        tool = self._by_name.get(call["name"])
        if call["problem"] is not None:
            ok, content, latency_ms = False, call["problem"], None
        elif tool is None:
            known = ", ".join(sorted(self._by_name))
            ok, content, latency_ms = False, f"no tool named {call['name']!r} ({known})", None
        else:
            outcome = await tool_run(
                tool,
                trial.state,
                call["arguments"],
                timeout_s=self.config.tool_timeout_s,
                executor=self._executor,
            )
            trial.state = outcome.state
            ok, content, latency_ms = outcome.ok, outcome.content, outcome.latency_ms
        step = {
            "kind": "tool_result",
            "name": call["name"],
            "id": call["id"],
            "content": content,
            "status": "ok" if ok else "error",
        }
        if latency_ms is not None:
            step["latency_ms"] = latency_ms
        trial.steps.append(step)
        return ToolResult(call=call, ok=ok, text=tool_content_text(content))

    def _unrun(
        self, trial: _Trial, calls: list[dict], reason: str, kind: str
    ) -> tuple[str, str, str]:
        """End the trial at a cap: each call of the last reply gets a "not run" error result."""
        for call in calls:
            trial.steps.append(
                {
                    "kind": "tool_result",
                    "name": call["name"],
                    "id": call["id"],
                    "content": f"not run: {reason}",
                    "status": "error",
                }
            )
        return "", limit_error(kind, reason), kind


def _sendable(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with U+0000 and lone surrogates replaced by U+FFFD (``core.text``), so the
    next request's UTF-8 body can be encoded (a tool's or a model's own text may hold one)."""
    return unstorable_replace(message)[0]
