"""The target contract.

A target turns one case (one attempt) into a ``TargetResult``. It never raises for a
provider or pipeline failure: the result's ``error`` makes an errored trial. It raises
``DomainError`` only when built from a bad configuration, before any call. Targets are
async so one task runs a chunk concurrently; a sync pipeline runs in a worker thread.

Results are storable text (``result_storable``, ``core.text``): U+0000 and lone surrogates
become U+FFFD, counted in ``raw_response`` (``REPLACED_KEY``), so the trial is written
rather than failing at insert and being called again."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol

from core.errors import DomainError, value_shown
from core.text import REPLACED_KEY, unstorable_replace
from evals.trajectory.steps import TrajectoryError, final_state_clean, trajectory_clean
from providers.endpoint import MAX_CONCURRENCY

# Calls in flight when a target's config does not say, any kind.
DEFAULT_CONCURRENCY = 16


def concurrency_parse(value: Any) -> int:
    """A target's ``concurrency`` (calls in flight over every worker): an integer from 1 to
    ``MAX_CONCURRENCY``; anything else (a bool, a float, a string) is a ``DomainError`` on
    ``target.concurrency``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise DomainError(
            f"expected an integer from 1 to {MAX_CONCURRENCY}, got {value_shown(value, limit=40)}",
            field="target.concurrency",
        )
    return value


def concurrency_default(config: dict) -> int:
    """The calls in flight of a ``config`` without ``concurrency``: a legacy
    ``settings.concurrency`` held to 1..``MAX_CONCURRENCY`` when a finite number, else
    ``DEFAULT_CONCURRENCY``."""
    settings = config.get("settings")
    value = settings.get("concurrency") if isinstance(settings, dict) else None
    try:
        return DEFAULT_CONCURRENCY if value is None else min(MAX_CONCURRENCY, max(1, int(value)))
    except (TypeError, ValueError, OverflowError):
        return DEFAULT_CONCURRENCY


def concurrency_read(config: dict) -> int:
    """A target config's calls in flight over every worker: ``concurrency_parse`` of its
    ``concurrency`` (``DomainError`` on ``target.concurrency``), else ``concurrency_default``."""
    if config.get("concurrency") is None:
        return concurrency_default(config)
    return concurrency_parse(config["concurrency"])


@dataclass(frozen=True)
class CaseInput:
    """What a target sees of a case: key, input (str or JSON object), expected, context, tags,
    the attempt number (1..N), and an agent case's goal state (JSON or None)."""

    key: str
    input: Any
    expected: Any = None
    context: list[dict] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    attempt: int = 1
    goal_state: Any = None


@dataclass(frozen=True)
class TargetResult:
    """One call's outcome.

    ``output``: the text to grade ("" on error); ``raw_response``: JSON-safe reply or error
    body; ``input_tokens``/``output_tokens``/``cache_write_tokens``/``cache_read_tokens``/
    ``reasoning_tokens``: the disjoint token classes (``providers.usage``), None when unknown;
    ``latency_ms``: wall-clock ms over retries; ``error``: None on success, else the provider's
    own words; ``error_kind``: the kind alone (``rate_limited``, ``timeout``, ...); ``model``:
    who answered (for pricing); ``attempts``: HTTP attempts; ``request``: the exact body sent,
    None for in-process targets; ``trajectory`` (``evals.trajectory.steps``) and
    ``final_state``: an agent's, kept on error too; ``cost_usd``: the target's own account
    (USD), else None and the runner prices the tokens (``providers.pricing``)."""

    output: str
    raw_response: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = 0.0
    error: str | None = None
    model: str | None = None
    attempts: int = 1
    error_kind: str | None = None
    request: dict[str, Any] | None = None
    trajectory: list[dict] | None = None
    final_state: Any = None
    cost_usd: Decimal | None = None
    cache_write_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def result_storable(result: TargetResult) -> TargetResult:
    """``result`` with every U+0000 and lone surrogate of its text fields replaced by U+FFFD and
    counted in ``raw_response[REPLACED_KEY]`` (a non-dict reply kept under ``"reply"``); a clean
    result comes back unchanged. A trajectory or final state that cannot be stored makes the
    result errored, naming the field: a malformed trajectory is the pipeline's error."""
    try:
        trajectory, n_trajectory = trajectory_clean(result.trajectory)
        final_state, n_final = final_state_clean(result.final_state)
    except TrajectoryError as exc:
        return result_storable(
            replace(
                result,
                output="",
                trajectory=None,
                final_state=None,
                error=f"{exc.field}: {exc}",
                error_kind="malformed_trajectory",
            )
        )
    output, n_output = unstorable_replace(result.output)
    raw, n_raw = unstorable_replace(result.raw_response)
    error, n_error = unstorable_replace(result.error)
    model, n_model = unstorable_replace(result.model)
    counts = {
        "output": n_output,
        "raw_response": n_raw,
        "error": n_error,
        "model": n_model,
        "trajectory": n_trajectory,
        "final_state": n_final,
    }
    record = {name: n for name, n in counts.items() if n}
    if not record:
        if trajectory is result.trajectory:
            return result
        return replace(result, trajectory=trajectory, final_state=final_state)
    if isinstance(raw, dict):
        raw = {**raw, REPLACED_KEY: record}
    else:
        raw = {REPLACED_KEY: record} if raw is None else {"reply": raw, REPLACED_KEY: record}
    return replace(
        result,
        output=output,
        raw_response=raw,
        error=error,
        model=model,
        trajectory=trajectory,
        final_state=final_state,
    )


class Target(Protocol):
    """Anything with ``kind``, ``model``, ``concurrency`` (calls in flight over every
    worker, read from its typed config) and an async ``call``."""

    kind: str
    model: str | None
    concurrency: int

    async def call(self, case: CaseInput) -> TargetResult: ...

    async def aclose(self) -> None: ...


def target_from_config(config: dict) -> Target:
    """Build a target from a run's target snapshot ``{"kind": "openai"|"callable"|"simulated",
    ...}``. Raises ``DomainError`` naming the bad field."""
    if not isinstance(config, dict):
        raise DomainError("expected an object", field="target")
    kind = config.get("kind")
    if kind == "openai":
        from evals.runner.targets.openai import OpenAITarget  # noqa: PLC0415 - the kinds import this module

        return OpenAITarget.from_config(config)
    if kind == "callable":
        from evals.runner.targets.pycallable import CallableTarget  # noqa: PLC0415 - the kinds import this module

        return CallableTarget.from_config(config)
    if kind == "simulated":
        from evals.runner.targets.simulated import SimulatedTarget  # noqa: PLC0415 - the kinds import this module

        return SimulatedTarget.from_config(config)
    raise DomainError(f"unknown kind {kind!r} (openai, callable, simulated)", field="target.kind")


def target_validate(config: dict) -> Any:
    """Build and close the target once to validate ``config`` (raises ``DomainError``); returns it.
    Built inside one event loop, on a helper thread when the caller already runs one."""

    async def build_and_close() -> Any:
        target = target_from_config(config)
        await target.aclose()
        return target

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(build_and_close())
    box: dict[str, Any] = {}

    def on_thread() -> None:
        try:
            box["target"] = asyncio.run(build_and_close())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = exc

    helper = threading.Thread(target=on_thread)
    helper.start()
    helper.join()
    if "error" in box:
        raise box["error"]
    return box["target"]
