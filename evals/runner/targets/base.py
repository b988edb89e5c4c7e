"""The target contract.

A target turns one case (one attempt) into a ``TargetResult``. It never raises for a
provider or pipeline failure: it returns a result with ``error`` set, which the runner
stores as an errored trial (never a pass). It may raise ``DomainError`` only when it
is built from a bad configuration, before any call.

Targets are async so that one Celery task can run a chunk of trials concurrently; a
synchronous pipeline (a Python callable) runs in a worker thread.

A target's result is storable text (``result_storable``, the replace policy of
``core.text``): a reply holding U+0000 or a lone surrogate has them replaced with U+FFFD,
and its ``raw_response`` records how many (``REPLACED_KEY``), so the trial is written and
says so, instead of failing at insert and leaving its chunk to be called again.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol

from core.errors import DomainError
from core.text import REPLACED_KEY, unstorable_replace
from evals.trajectory.steps import TrajectoryError, final_state_clean, trajectory_clean

# The most calls in flight a target may ask for (``concurrency``, any kind). Far above real
# use (the shared mock's stress runs use 64 to 128), and it keeps a typo or a hostile config
# from taking a process down: a chunk starts one coroutine and claims two trials per call in
# flight, and an OpenAI target one HTTP client per 8, built in the web process too when a
# run's config is checked (``target_validate``).
MAX_CONCURRENCY = 1024
# Calls in flight when a target's config does not say, any kind.
DEFAULT_CONCURRENCY = 16


def concurrency_parse(value: Any) -> int:
    """A target's ``concurrency`` (calls in flight over every worker): an integer from 1 to
    ``MAX_CONCURRENCY``; anything else (a bool, a float, a string) is a ``DomainError`` on
    ``target.concurrency``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise DomainError(
            f"expected an integer from 1 to {MAX_CONCURRENCY}, got {value!r:.40}",
            field="target.concurrency",
        )
    return value


def concurrency_default(config: dict) -> int:
    """The calls in flight of a target ``config`` without a ``concurrency`` of its own: an
    older ``settings.concurrency`` (never checked by a parser, so held to 1 to
    ``MAX_CONCURRENCY``, and ignored unless a finite number), else ``DEFAULT_CONCURRENCY``."""
    settings = config.get("settings")
    value = settings.get("concurrency") if isinstance(settings, dict) else None
    try:
        return DEFAULT_CONCURRENCY if value is None else min(MAX_CONCURRENCY, max(1, int(value)))
    except (TypeError, ValueError, OverflowError):
        return DEFAULT_CONCURRENCY


def concurrency_read(config: dict) -> int:
    """A target config's calls in flight over every worker: its ``concurrency``
    (``concurrency_parse``: a ``DomainError`` on ``target.concurrency`` when out of bounds),
    else ``concurrency_default``. Each kind's typed config reads it once, and the target
    exposes it as ``concurrency``."""
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

    ``output``: the text to grade ("" on error); ``raw_response``: JSON-safe provider reply
    or error body; ``input_tokens``/``output_tokens``: counts, None when unknown;
    ``latency_ms``: wall-clock milliseconds of the call including retries; ``error``: None on
    success, else a message carrying the provider's own words; ``model``: the model that
    answered (for pricing), None when unknown; ``attempts``: HTTP attempts made;
    ``error_kind``: the error's kind alone (``rate_limited``, ``server_error 503``,
    ``timeout``, ``client_error 400``, ``malformed_response``, ...), None on success or
    when the target does not classify its errors; ``request``: the exact request the target
    sent (an OpenAI-compatible target: the JSON body, ``{"model", "messages", **settings}``),
    None when it sends none of its own (callable, simulated); ``trajectory``: an agent's
    ordered steps (the shape of ``evals.trajectory.steps``), None for a single call;
    ``final_state``: the world's state when the agent stopped (any JSON), None when none.
    An errored agent trial keeps the steps it made before the error. ``cost_usd``: what the
    target itself says the call cost (USD; a callable agent's own account), None when it
    says nothing: the runner then prices the tokens (``evals.runner.pricing``).
    """

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

    @property
    def ok(self) -> bool:
        return self.error is None


def result_storable(result: TargetResult) -> TargetResult:
    """``result`` with every U+0000 and lone surrogate of its text (``output``,
    ``raw_response``, ``error``, ``model``, ``trajectory``, ``final_state``) replaced by
    U+FFFD; when any was, ``raw_response`` is a dict holding ``{REPLACED_KEY: {field:
    characters replaced}}`` for the fields that had some (a reply that was not a dict is kept
    under ``"reply"``). A clean result comes back unchanged. A trajectory or final state that
    cannot be stored at all (not a list of steps, not JSON) makes the result errored, with
    the field named and the steps dropped: a pipeline's malformed trajectory is its error,
    never a pass."""
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
    ...}``.

    Raises ``DomainError`` naming the bad field.
    """
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
    """Build the target once to validate ``config`` (raises ``DomainError``) and release
    it; returns it (for ``kind``/``model``). Built and closed inside one event loop, as the
    target contract asks, on a helper thread if the caller already runs a loop."""

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
