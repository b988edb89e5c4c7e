"""The global limit per endpoint: calls in flight, requests and tokens per minute, and the
pause a provider asks for, shared by every worker that calls the endpoint.

An endpoint is named by its key (``endpoint_key``): the target's ``limit_key`` when set, else
``<base_url>|<model>``. Every caller of one endpoint (a run's chunks on any worker, its
top-ups, a judge version calling the same model at the same URL) shares its state:

- calls in flight: a caller is let in while fewer than its own ``concurrency`` calls to the
  endpoint are in flight, counted over every worker (so a run's ``concurrency`` is its total,
  whatever the number of workers). A slot is a lease (``rules.LEASE_S``, 10 s, or the trial
  lease when shorter; renewed while the call runs), so a killed worker's slots come back
  within 10 s;
- ``rpm`` / ``tpm``: token buckets (``rules``), at the declared or the announced limit;
- a 429: the endpoint pauses for the asked time and slows down, then recovers (``rules``).

Where the state lives (``store_default``): Redis when ``REDIS_URL`` is set (production: every
worker on every machine), else a SQLite file under ``VAR_DIR`` (the embedded default: its
worker, a prefork worker's children, any second worker on the machine, and the web process
all call from different processes, so a process-local limiter would not be enough).

When the shared store cannot be reached (Redis down, the file locked past its timeout), the
limiter falls back to this process's own state (``stores.PROCESS_STORE``, the same rules) for
``FALLBACK_S`` and logs a warning (at most once a minute per endpoint): the run goes on, each
worker keeping the limits on its own, so N workers may together reach N times the limit while
the store is down. It never waits on a dead store past its timeouts.

A ``Limiter`` belongs to one event loop (like the target that owns it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from django.conf import settings

from evals.runner.limiter.rules import FULL, LEASE_S, Ask, Outcome
from evals.runner.limiter.stores import PROCESS_STORE, RedisStore, SqliteStore, StoreDown

logger = logging.getLogger(__name__)

# How long the process's own state stands in for a shared store that failed, in seconds.
FALLBACK_S = 5.0
# How often a waiter asks again when every slot is taken (a release elsewhere is not
# announced), in seconds; a release in this process wakes it at once.
POLL_S = 0.005
# The longest single wait before asking again (a pause may be shortened by another answer).
MAX_WAIT_STEP_S = 1.0

Sleep = Callable[[float], Awaitable[None]]

# Set by the call pool around a call it may still withdraw; the target calls ``call_sending``
# once its first attempt holds a slot, after which the call can no longer be withdrawn.
SEND_HOOK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "assay_limiter_send_hook", default=None
)

_last_warning: dict[str, float] = {}


def call_sending() -> None:
    """Tell the call pool (``SEND_HOOK``) that this call is about to be sent."""
    hook = SEND_HOOK.get()
    if hook is not None:
        SEND_HOOK.set(None)
        hook()


def endpoint_key(base_url: str, model: str, limit_key: str | None = None) -> str:
    """The endpoint's name in the limiter: ``limit_key`` when given, else
    ``"<base_url without trailing slash>|<model>"``."""
    return limit_key if limit_key else f"{base_url.rstrip('/')}|{model}"


def store_default():
    """The shared store: ``RedisStore(REDIS_URL)`` when ``REDIS_URL`` is set, else
    ``SqliteStore(VAR_DIR / "limiter.sqlite3")``."""
    url = getattr(settings, "REDIS_URL", "")
    if url:
        return RedisStore(url)
    return SqliteStore(settings.VAR_DIR / "limiter.sqlite3")


class Limiter:
    """One endpoint's limiter for one caller (``capacity`` = its ``concurrency``; ``rpm`` and
    ``tpm`` its declared limits, None when not declared).

    ``sleep``: the caller's own waits (a target's injectable sleep, its retries' backoff),
    through ``sleep()``; one that returns before its time (a test's fake clock) moves this
    limiter's clock on by the time it skipped, and from then on the limiter's own waits (a
    pause, a bucket) are virtual too: they move the clock instead of sleeping, so a fake
    clock never makes it spin or wait. Its own waits are never handed to ``sleep``.
    ``store``: default ``store_default()``.
    """

    def __init__(
        self,
        *,
        key: str,
        capacity: int,
        rpm: float | None = None,
        tpm: float | None = None,
        store=None,
        sleep: Sleep | None = None,
        lease_s: float | None = None,
    ) -> None:
        self.key = key
        self.capacity = capacity
        self.rpm = rpm
        self.tpm = tpm
        if lease_s is None:
            trial_lease = getattr(settings, "ASSAY", {}).get("TRIAL_LEASE_SECONDS", LEASE_S)
            lease_s = min(LEASE_S, float(trial_lease))
        self.lease_s = lease_s
        self.store = store if store is not None else store_default()
        self._sleep_inner = sleep or asyncio.sleep
        self._offset = 0.0  # seconds a fake sleep skipped
        self._front: asyncio.Lock | None = None  # one waiter asks the store at a time
        self._released: asyncio.Event | None = None
        self._held: dict[str, object] = {}  # slot token -> the store that granted it
        self._down_until = 0.0
        self._renewer: asyncio.Task | None = None

    def now(self) -> float:
        """This limiter's clock: epoch seconds, plus what a fake sleep skipped."""
        return time.time() + self._offset

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` with the injected sleep, keeping the clock honest (class doc)."""
        started = time.monotonic()
        await self._sleep_inner(seconds)
        skipped = seconds - (time.monotonic() - started)
        if skipped > 0.001:
            self._offset += skipped

    async def _wait(self, seconds: float) -> None:
        """The limiter's own wait: real, or virtual once a fake sleep was seen (class doc)."""
        if self._offset > 0:
            self._offset += seconds
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(seconds)

    def _store_now(self):
        return PROCESS_STORE if time.monotonic() < self._down_until else self.store

    def _fell_back(self, exc: StoreDown) -> None:
        self._down_until = time.monotonic() + FALLBACK_S
        last = _last_warning.get(self.key, 0.0)
        if time.monotonic() - last >= 60.0:
            _last_warning[self.key] = time.monotonic()
            logger.warning(
                "rate limiter store unreachable (%s); endpoint %s is limited per process "
                "for %.0f s: workers together may exceed its limits until it is back",
                exc,
                self.key,
                FALLBACK_S,
            )

    async def acquire(self, tokens: float = 0.0) -> str:
        """Wait for a slot (and the buckets' tokens: one request, ``tokens`` model tokens);
        returns the slot's token, to hand to ``release``. Cancelling the wait takes
        nothing."""
        if self._front is None:
            self._front = asyncio.Lock()
            self._released = asyncio.Event()
        ask = Ask(
            capacity=self.capacity,
            rpm=self.rpm,
            tpm=self.tpm,
            tokens=tokens,
            lease_s=self.lease_s,
        )
        token = uuid.uuid4().hex
        poll = POLL_S
        async with self._front:
            while True:
                store = self._store_now()
                try:
                    wait = await store.acquire(self.key, token, self.now(), ask)
                except StoreDown as exc:
                    self._fell_back(exc)
                    continue
                if wait == 0:
                    self._held[token] = store
                    self._renew_start()
                    return token
                if wait == FULL:
                    self._released.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._released.wait(), poll)
                    poll = min(poll * 1.5, 0.05)
                else:
                    await self._wait(min(wait, MAX_WAIT_STEP_S))

    async def release(self, token: str, outcome: Outcome | None = None) -> None:
        """Give back the slot ``token`` and learn from ``outcome`` (``rules.release_rule``;
        None: nothing to learn). A store that fails here is skipped: the lease expires."""
        store = self._held.pop(token, None)
        if store is None:
            return
        if self._released is not None:
            self._released.set()
        try:
            await store.release(self.key, token, self.now(), outcome)
        except StoreDown as exc:
            self._fell_back(exc)

    def _renew_start(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_loop())

    async def _renew_loop(self) -> None:
        while self._held:
            await asyncio.sleep(self.lease_s / 3)
            by_store: dict[int, tuple[object, list[str]]] = {}
            for token, store in list(self._held.items()):
                by_store.setdefault(id(store), (store, []))[1].append(token)
            for store, tokens in by_store.values():
                try:
                    await store.renew(self.key, tokens, self.now(), self.lease_s)
                except StoreDown as exc:
                    self._fell_back(exc)

    async def aclose(self) -> None:
        """Give back every slot still held, stop renewing, close the store's client."""
        for token in list(self._held):
            await self.release(token)
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if self.store is not PROCESS_STORE:
            await self.store.aclose()


__all__ = [
    "SEND_HOOK",
    "Limiter",
    "Outcome",
    "call_sending",
    "endpoint_key",
    "store_default",
]
