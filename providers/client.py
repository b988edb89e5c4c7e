"""The attempt loop every protocol's client shares (``EndpointClient``): sends a prebuilt body
over ``providers.transport.JsonPoster``, each attempt holding a slot of the shared limiter, and
returns a storable ``ProviderReply``; it never raises for a provider's failure (kinds:
``providers.answers``).

429, 5xx, timeouts and connection errors are retried with equal-jitter backoff, at least
``Retry-After``; other 4xx are not. A cancelled call makes no further attempt
(``providers.call_stop``); a call that waited for an unreachable limiter store longer than
its ``timeout_s`` ends with kind ``limiter_unavailable`` (docs/rate-limits.md). After a
``rejected_parameter`` with no call answered, the
client sends nothing more: later calls end at once with that error (``attempts`` 0,
``raw_response["not_sent"]``), so a refused job pays one round. A client belongs to one
event loop."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from providers.answers import Attempt
from providers.call_stop import CANCELLED_KIND, Stopped, unless_stopped
from providers.endpoint import EndpointConfig
from providers.limiter import STORE_LOST_KIND, Limiter, StoreLost, call_sending, endpoint_key
from providers.limiter.headers import outcome_read
from providers.limiter.rules import Outcome
from providers.metrics import CALLS, LIMITER_WAIT, RATE_LIMITED, RETRIES
from providers.reply import ProviderReply, reply_storable
from providers.transport import HttpAnswer, HttpFailure, JsonPoster

Sleep = Callable[[float], Awaitable[None]]


class EndpointClient:
    """Calls to ``config``'s endpoint; a protocol's client sets ``path`` and says how a call is
    authenticated (``auth_headers``), how an answer reads (``answer_read``) and how many tokens
    a body may use (``tokens_estimate``). ``sleep`` and ``rng`` are injectable (tests run the
    retry schedule on a fake clock)."""

    # Appended to the endpoint's ``base_url``: the URL every call is POSTed to.
    path = ""
    # The protocol's name in ``providers.protocols.PROVIDERS`` (the metrics' ``provider``).
    provider = ""

    def __init__(
        self,
        config: EndpointConfig,
        *,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._rng = rng or random.Random()
        self._semaphore = asyncio.Semaphore(config.concurrency)
        # The endpoint's shared limit (providers.limiter): every wait, the retries' too,
        # goes through its clock.
        self.limiter = Limiter(
            key=endpoint_key(config.base_url, config.model, config.limit_key),
            capacity=config.concurrency,
            rpm=config.rpm,
            tpm=config.tpm,
            sleep=sleep or asyncio.sleep,
        )
        self._sleep: Sleep = self.limiter.sleep
        # The metrics' labels (providers.metrics): bounded by the configured endpoints.
        labels = (self.provider, urlsplit(config.base_url).hostname or "")
        self._calls = {
            kind: CALLS.labels(*labels, kind) for kind in ("timeout", "connection_error")
        }
        self._labels = labels
        self._limiter_wait = LIMITER_WAIT.labels(*labels)
        # The first rejected-parameter error while no call has been answered: later calls
        # of this client end with it, unsent (module docstring).
        self._refused: ProviderReply | None = None
        self._answered = False
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        headers.update(self.auth_headers(api_key or None))
        self.http = JsonPoster(
            f"{config.base_url}{self.path}",
            headers=headers,
            timeout_s=config.timeout_s,
            max_connections=config.concurrency,
        )

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The headers a call carries beside ``Content-Type``; ``api_key`` None: keyless."""
        raise NotImplementedError

    def answer_read(self, response: HttpAnswer, body: dict[str, Any]) -> Attempt:
        """What ``response`` to ``body`` says (``providers.answers``)."""
        raise NotImplementedError

    def tokens_estimate(self, body: dict[str, Any]) -> float:
        """Model tokens ``body`` may use, for ``tpm`` (corrected by the answer's ``usage``)."""
        return tokens_estimate(body)

    def backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Wait before retry number ``attempt`` (1-based), in seconds: "equal jitter",
        half of min(max, base × 2^(attempt−1)) plus a uniform draw over the other half
        (AWS Architecture Blog, "Exponential Backoff and Jitter", 2015), and never less
        than ``Retry-After``."""
        doubled: float = self.config.backoff_base_s * 2 ** (attempt - 1)
        cap = min(self.config.backoff_max_s, doubled)
        wait = cap / 2 + self._rng.uniform(0, cap / 2)
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return wait

    async def send(self, body: dict[str, Any]) -> ProviderReply:
        """Up to ``max_attempts`` attempts; never raises for provider failures. ``latency_ms``:
        wall-clock over all attempts and waits."""
        if self._refused is not None and not self._answered:
            return replace(
                self._refused,
                raw_response={**self._refused.raw_response, "not_sent": True},
                attempts=0,
                latency_ms=0.0,
            )
        reply = reply_storable(await self._send(body))
        if reply.ok or reply.error_kind != "rejected_parameter":
            self._answered = self._answered or reply.ok
        elif self._refused is None:
            self._refused = reply
        return reply

    async def _send(self, body: dict[str, Any]) -> ProviderReply:
        started = time.perf_counter()
        last: Attempt | None = None
        for attempt in range(1, self.config.max_attempts + 1):
            async with self._semaphore:
                estimate = self.tokens_estimate(body)
                waiting = time.perf_counter()
                try:
                    # A stopped call (its run cancelled, ``call_stop``) makes no new attempt:
                    # checked before each one, and a wait for the limiter wakes on it.
                    slot = await unless_stopped(
                        self.limiter.acquire(estimate, store_wait_s=self.config.timeout_s)
                    )
                except Stopped as stopped:
                    if stopped.value is not None:
                        await self.limiter.release(stopped.value, None)
                    return self._stopped(last, attempt - 1, started)
                except StoreLost as lost:
                    return self._unsent(STORE_LOST_KIND, str(lost), last, attempt - 1, started)
                self._limiter_wait.observe(time.perf_counter() - waiting)
                if attempt == 1:
                    call_sending()  # from here on the call cannot be withdrawn
                last = None
                try:
                    last = await self._attempt(body, estimate)
                finally:
                    await self.limiter.release(slot, last.outcome if last else None)
            if last.result is not None:
                return _with(last.result, started=started, attempts=attempt)
            if attempt == self.config.max_attempts:
                break
            if (
                last.retry_after_s is not None
                and last.retry_after_s > self.config.retry_after_max_s
            ):
                break  # the provider asks for a wait longer than we are willing to hold
            try:
                await unless_stopped(self._sleep(self.backoff_s(attempt, last.retry_after_s)))
            except Stopped:
                return self._stopped(last, attempt, started)
            RETRIES.labels(*self._labels, last.retry_kind).inc()  # the next attempt is a retry
        assert last is not None
        error = f"{last.retry_kind} after {attempt} attempts: {last.retry_message}"
        return ProviderReply(
            output="",
            raw_response=last.raw,
            error=error,
            error_kind=last.retry_kind,
            model=self.config.model,
            attempts=attempt,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def _stopped(self, last: Attempt | None, attempts: int, started: float) -> ProviderReply:
        """The reply of a call stopped before attempt ``attempts + 1``: kind ``cancelled``, the last
        failure kept."""
        why = f"stopped before attempt {attempts + 1}"
        return self._unsent(CANCELLED_KIND, why, last, attempts, started)

    def _unsent(
        self, kind: str, why: str, last: Attempt | None, attempts: int, started: float
    ) -> ProviderReply:
        """The reply of a call that ended before attempt ``attempts + 1`` was sent: kind
        ``kind``, ``why``, the last failure kept."""
        before = f"; last: {last.retry_kind}: {last.retry_message}" if last is not None else ""
        return ProviderReply(
            output="",
            raw_response=last.raw if last is not None else None,
            error=f"{kind}: {why}{before}",
            error_kind=kind,
            model=self.config.model,
            attempts=attempts,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def _attempt(self, body: dict[str, Any], estimate: float = 0.0) -> Attempt:
        try:
            response = await self.http.post(body)
        except HttpFailure as exc:
            self._calls["timeout" if exc.timeout else "connection_error"].inc()
            if exc.timeout:
                return Attempt(
                    retry_kind="timeout",
                    retry_message=f"no response within {self.config.timeout_s:g} s ({exc.name})",
                    raw={"error": "timeout", "timeout_s": self.config.timeout_s},
                )
            return Attempt(
                retry_kind="connection_error",
                retry_message=f"{exc.name}: {exc.detail}",
                raw={"error": "connection_error", "detail": exc.detail},
            )
        CALLS.labels(*self._labels, str(response.status)).inc()
        if response.status == 429:
            RATE_LIMITED.labels(*self._labels).inc()
        attempt = self.answer_read(response, body)
        attempt.outcome = _outcome(response, attempt, estimate)
        return attempt

    async def aclose(self) -> None:
        """Close the HTTP client's connections and the limiter's store client."""
        await self.http.aclose()
        await self.limiter.aclose()


def tokens_estimate(body: dict[str, Any]) -> float:
    """Model tokens a request may use, for ``tpm``: message characters / 4 plus ``max_tokens``
    (OpenAI cookbook, ``api_request_parallel_processor.py``), corrected by ``usage`` later."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
    completion = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    if not isinstance(completion, int | float) or isinstance(completion, bool):
        completion = 0
    return chars / 4 + completion


def _outcome(response: HttpAnswer, attempt: Attempt, estimate: float) -> Outcome:
    """What the answer teaches the limiter; a 429's estimate is given back."""
    limited = response.status == 429
    if limited:
        delta = -estimate
    elif attempt.result is not None and attempt.result.ok:
        used = (attempt.result.input_tokens or 0) + (attempt.result.output_tokens or 0)
        delta = used - estimate if used else 0.0
    else:
        delta = 0.0
    return outcome_read(
        response.headers,
        limited=limited,
        retry_after_s=attempt.retry_after_s,
        tokens_delta=delta,
    )


def _with(reply: ProviderReply, *, started: float, attempts: int) -> ProviderReply:
    return replace(reply, attempts=attempts, latency_ms=(time.perf_counter() - started) * 1000)
