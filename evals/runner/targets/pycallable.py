"""A target that calls a registered Python function in-process: ``{"kind": "callable",
"path": "package.module:function", "settings": {...}, "concurrency": 8}``.

``path`` names a function registered as a ``pipeline`` (``core.registry``). It is called as
``fn(case: CaseInput, **settings)`` and returns the output text or ``{"output",
"input_tokens"?, "output_tokens"?, "cache_write_tokens"?, "cache_read_tokens"?,
"reasoning_tokens"?, "model"?, "cost_usd"?, "trajectory"?, "final_state"?}`` (the token
classes of ``providers.usage``, disjoint; an absent one is unknown).
Cost (USD): ``cost_usd`` (in [0, 1,000,000), else an errored trial), else the steps' sum, else
the tokens priced by the runner; unknown stays null. Exceptions and bad shapes are errored
results; unstorable text becomes U+FFFD."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from core.bounds import COST_USD_QUANTUM, cost_problem
from core.errors import DomainError
from core.registry import registry_get, registry_settings_check
from evals.runner.targets.base import (
    DEFAULT_CONCURRENCY,
    CaseInput,
    TargetResult,
    concurrency_read,
    result_storable,
)

KNOWN_FIELDS = frozenset({"kind", "path", "settings", "concurrency", "model", "prompt_revision"})


@dataclass(frozen=True)
class CallableConfig:
    """Parsed config: the pipeline's registered name, keyword settings, max calls in flight."""

    path: str
    settings: dict[str, Any] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY
    model: str | None = None

    @classmethod
    def parse(cls, config: dict) -> CallableConfig:
        """Validate a config dict; raises ``DomainError`` naming the field."""
        unknown = sorted(set(config) - KNOWN_FIELDS)
        if unknown:
            raise DomainError("unknown field", field=f"target.{unknown[0]}")
        path = config.get("path")
        if not isinstance(path, str) or not path:
            raise DomainError(
                f"expected a registered pipeline's name, got {path!r:.200}", field="target.path"
            )
        settings = config.get("settings")
        settings = {} if settings is None else settings
        if not isinstance(settings, dict) or not all(isinstance(k, str) for k in settings):
            raise DomainError("expected an object", field="target.settings")
        concurrency = concurrency_read(config)
        model = config.get("model")
        if model is not None and not isinstance(model, str):
            raise DomainError("expected a string", field="target.model")
        return cls(path=path, settings=dict(settings), concurrency=concurrency, model=model)


class CallableTarget:
    """An in-process pipeline."""

    kind = "callable"

    def __init__(self, config: CallableConfig) -> None:
        self.config = config
        self.model: str | None = config.model
        self.concurrency = config.concurrency
        self.function = registry_get(name=config.path, kind="pipeline", field="target.path")
        registry_settings_check(
            function=self.function, settings=config.settings, field="target.settings"
        )
        # an async function, or an object whose __call__ is async
        self._is_async = inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(
            type(self.function).__call__
        )
        self._semaphore = asyncio.Semaphore(config.concurrency)

    @classmethod
    def from_config(cls, config: dict) -> CallableTarget:
        """Build from a run's target snapshot; raises ``DomainError`` naming the field."""
        return cls(CallableConfig.parse(config))

    async def call(self, case: CaseInput) -> TargetResult:
        """Run the function on ``case``; ``latency_ms`` is its wall-clock time in ms."""
        started = time.perf_counter()
        async with self._semaphore:
            try:
                if self._is_async:
                    value = await self.function(case, **self.config.settings)
                else:
                    value = await asyncio.to_thread(self.function, case, **self.config.settings)
                    if inspect.isawaitable(value):
                        value = await value
                result = self._result(value)
            # The pipeline's failure is data: an errored trial. SystemExit too: a pipeline
            # that calls sys.exit() must not take the worker down with it.
            except (Exception, SystemExit) as exc:
                result = TargetResult(
                    output="",
                    error=f"{type(exc).__name__}: {exc}",
                    error_kind="exception",
                    model=self.model,
                )
        latency_ms = (time.perf_counter() - started) * 1000
        return replace(result_storable(result), latency_ms=latency_ms)

    def _result(self, value: Any) -> TargetResult:
        if isinstance(value, str):
            return TargetResult(output=value, model=self.model)
        if isinstance(value, dict):
            output = value.get("output")
            if not isinstance(output, str):
                raise TypeError(
                    f"the returned dict's 'output' must be a string, got {output!r:.80}"
                )
            model = value.get("model", self.model)
            if model is not None and not isinstance(model, str):
                raise TypeError(f"the returned dict's 'model' must be a string, got {model!r:.80}")
            rest = {k: v for k, v in value.items() if k not in ("trajectory", "final_state")}
            return _with_cost(
                value,
                TargetResult(
                    output=output,
                    input_tokens=_tokens(value, "input_tokens"),
                    output_tokens=_tokens(value, "output_tokens"),
                    cache_write_tokens=_tokens(value, "cache_write_tokens"),
                    cache_read_tokens=_tokens(value, "cache_read_tokens"),
                    reasoning_tokens=_tokens(value, "reasoning_tokens"),
                    model=model,
                    raw_response=_json_safe(rest),
                    trajectory=value.get("trajectory"),
                    final_state=value.get("final_state"),
                ),
            )
        raise TypeError(f"expected a str or a dict with 'output', got {type(value).__name__}")

    async def aclose(self) -> None:
        """Nothing to release."""


def _tokens(value: dict, name: str) -> int | None:
    count = value.get(name)
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TypeError(f"the returned dict's {name!r} must be an integer ≥ 0, got {count!r:.80}")
    return count


def _with_cost(value: dict, result: TargetResult) -> TargetResult:
    """``result`` with the cost the function stated, or its trajectory's steps' sum."""
    if "cost_usd" in value:
        cost = value["cost_usd"]
        if cost is None:
            return result
        if isinstance(cost, bool) or not isinstance(cost, int | float | Decimal):
            raise TypeError(f"the returned dict's 'cost_usd' must be a number, got {cost!r:.80}")
        return replace(result, cost_usd=_usd(Decimal(str(cost)), "'cost_usd'"))
    steps = value.get("trajectory")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return result  # no steps, or a shape result_storable makes the trial's error
    costs = [s["cost_usd"] for s in steps if s.get("cost_usd") is not None]
    unknown = any(  # a model call (a step stating tokens) of unknown cost: as the timeline
        s.get("cost_usd") is None
        and (s.get("input_tokens") is not None or s.get("output_tokens") is not None)
        for s in steps
    )
    if not costs or unknown:
        return result
    if not all(isinstance(c, int | float) and not isinstance(c, bool) for c in costs):
        return result  # the step parser names the bad cost
    total = sum((Decimal(str(c)) for c in costs), Decimal(0))
    return replace(result, cost_usd=_usd(total, "steps' cost_usd"))


def _usd(cost: Decimal, what: str) -> Decimal:
    problem = cost_problem(cost)
    if problem is not None:
        raise TypeError(f"the returned {what}: {problem}")
    return cost.quantize(COST_USD_QUANTUM, rounding=ROUND_HALF_UP)


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))
