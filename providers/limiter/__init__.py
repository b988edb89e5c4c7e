"""The limit per endpoint, shared by every worker: calls in flight, ``rpm``/``tpm`` buckets and
a 429's pause and slow-down (docs/rate-limits.md; the rules in ``rules``).

An endpoint's key is its ``limit_key``, else ``<base_url>|<model>``; a caller's
``concurrency`` counts over every worker. State lives in Redis when ``LIMITER_REDIS_URL``
(else ``REDIS_URL``) is set, else a SQLite file under ``VAR_DIR``. When the store is down
(``ASSAY_LIMITER_ON_STORE_LOSS``): ``pause``, the default, starts no new call until it is
back, asking it every ``PROBE_S``, and then takes no new slot for ``RESYNC_S`` while the
other holders count their calls in flight again; a call that waited for it longer than its
budget raises ``StoreLost``. ``per-process`` keeps the limits per process for
``FALLBACK_S`` (N workers may reach N times the limit). Both warn. A ``Limiter`` belongs to
one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable

from django.conf import settings

from providers.limiter.rules import LEASE_S, Ask, Grant, Outcome, outcome_merge
from providers.limiter.stores import PROCESS_STORE, RedisStore, SqliteStore, Store, StoreDown

logger = logging.getLogger(__name__)

# How long the process's own state stands in for a shared store that failed, in seconds
# (``per-process``).
FALLBACK_S = 5.0
# What a holder does while the shared store is unreachable (``ASSAY_LIMITER_ON_STORE_LOSS``).
PAUSE = "pause"
PER_PROCESS = "per-process"
ON_STORE_LOSS = (PAUSE, PER_PROCESS)
# ``pause``: how often a holder that lost the store asks it again (a holder whose calls are in
# flight too: its first answer counts them again), in seconds.
PROBE_S = 0.25
# ``pause``: how long after the store is back a holder that lost it takes no new slot, in
# seconds: every holder that lost it has asked again by then (every PROBE_S), so its calls
# still in flight are counted again, whether their leases expired meanwhile or not.
RESYNC_S = 2 * PROBE_S + 0.1
# How often a waiter asks again when every slot is taken (a release elsewhere is not
# announced), in seconds, growing to MAX_POLL_S (SYNC_S while this holder has calls in
# flight: its own releases hand their slots on); a release in this holder wakes it at once.
POLL_S = 0.005
MAX_POLL_S = 0.05
# The longest single wait before asking again (a pause may be shortened by another answer).
MAX_WAIT_STEP_S = 1.0
# How long after the store's last answer a finished call's slot may go to this holder's
# next call without asking the store (when no bucket paces the endpoint, no other holder is
# owed a slot and the endpoint is not paused), in seconds: the delay within which a pause
# or a slow-down caused by another worker reaches this one.
SYNC_S = 0.1
# How long a slot no call of this holder wants is kept for the next one before it is given
# back, in seconds.
LINGER_S = 0.005

Sleep = Callable[[float], Awaitable[None]]

# Set by the call pool around a call it may still withdraw; the target calls ``call_sending``
# once its first attempt holds a slot, after which the call can no longer be withdrawn.
SEND_HOOK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "assay_limiter_send_hook", default=None
)

_last_warning: dict[str, float] = {}


# The ``error_kind`` of a call that waited for an unreachable store longer than its budget
# (``StoreLost``; ``providers.client.EndpointClient``).
STORE_LOST_KIND = "limiter_unavailable"


class StoreLost(Exception):
    """A call waited for an unreachable store (``pause``) longer than its budget; nothing was
    sent."""


def call_sending() -> None:
    """Tell the call pool (``SEND_HOOK``) that this call is about to be sent."""
    hook = SEND_HOOK.get()
    if hook is not None:
        SEND_HOOK.set(None)
        hook()


def endpoint_key(base_url: str, model: str, limit_key: str | None = None) -> str:
    """``limit_key``, else ``"<base_url without trailing slash>|<model>"``."""
    return limit_key if limit_key else f"{base_url.rstrip('/')}|{model}"


def store_default() -> Store:
    """``RedisStore`` when ``LIMITER_REDIS_URL`` (else ``REDIS_URL``) is set, else
    ``SqliteStore`` under ``VAR_DIR``."""
    url = getattr(settings, "LIMITER_REDIS_URL", "") or getattr(settings, "REDIS_URL", "")
    if url:
        return RedisStore(url)
    return SqliteStore(settings.VAR_DIR / "limiter.sqlite3")


def _significant(outcome: Outcome, announced: tuple[float | None, float | None]) -> bool:
    """Whether the store must hear ``outcome`` before the next send: a 429, an exhausted
    ``remaining``, a limit announced and not yet told."""
    return (
        outcome.limited
        or outcome.remaining_requests == 0
        or outcome.remaining_tokens == 0
        or (outcome.rpm_limit is not None and outcome.rpm_limit != announced[0])
        or (outcome.tpm_limit is not None and outcome.tpm_limit != announced[1])
    )


class Limiter:
    """One caller's holder of an endpoint's slots (``capacity``: its ``concurrency``; ``rpm``,
    ``tpm``: declared, or None).

    Slots are taken in exchanges with the store (``rules.exchange_rule``, one round trip). A
    finished call's slot goes straight to this holder's next call while the last answer is
    fresh (``SYNC_S``), no bucket paces the endpoint, it is not paused, the cap holds and no
    other holder is owed one; an unwanted slot is given back after ``LINGER_S``.

    ``sleep``: the caller's injected sleep. Once it returns early (a fake clock), the
    limiter's clock moves by what it skipped and its own waits become virtual, so tests never
    spin. ``on_store_loss``: ``pause`` or ``per-process`` (module doc; default the setting
    ``ASSAY["LIMITER_ON_STORE_LOSS"]``); ``fallback``: the process's own store
    (``per-process``)."""

    def __init__(
        self,
        *,
        key: str,
        capacity: int,
        rpm: float | None = None,
        tpm: float | None = None,
        store: Store | None = None,
        sleep: Sleep | None = None,
        lease_s: float | None = None,
        on_store_loss: str | None = None,
        fallback: Store | None = None,
    ) -> None:
        self.key = key
        self.capacity = capacity
        self.rpm = rpm
        self.tpm = tpm
        if lease_s is None:
            trial_lease = getattr(settings, "ASSAY", {}).get("TRIAL_LEASE_SECONDS", LEASE_S)
            lease_s = min(LEASE_S, float(trial_lease))
        self.lease_s = lease_s
        if on_store_loss is None:
            on_store_loss = getattr(settings, "ASSAY", {}).get("LIMITER_ON_STORE_LOSS", PAUSE)
        if on_store_loss not in ON_STORE_LOSS:
            raise ValueError(f"on_store_loss must be one of {ON_STORE_LOSS}: {on_store_loss!r}")
        self.on_store_loss = on_store_loss
        self.fallback = fallback if fallback is not None else PROCESS_STORE
        self.store = store if store is not None else store_default()
        self.holder = uuid.uuid4().hex
        self.round_trips = 0
        self._sleep_inner = sleep or asyncio.sleep
        self._offset = 0.0  # seconds a fake sleep skipped
        self._down_until = 0.0  # per-process: the fallback stands in until then (monotonic)
        self._lost_since: float | None = None  # pause: the store unreachable since (monotonic)
        self._resync_until = 0.0  # pause: no new slot before this (monotonic)
        self._calls: dict[int, Store] = {}  # call id -> the store that granted its slot
        self._next_call = 0
        self._busy: dict[Store, int] = {}  # store -> slots in this holder's calls
        self._idle: dict[Store, int] = {}  # store -> slots held that no call uses
        # (call, its tokens)
        self._waiters: deque[tuple[asyncio.Future[int], float]] = deque()
        self._pending: Outcome | None = None  # learnt, not yet told to the store
        self._urgent = False  # ... and the store must hear it before the next call
        # limits this holder told the store of (requests, tokens per minute)
        self._announced: tuple[float | None, float | None] = (None, None)
        self._grant: Grant | None = None  # the store's last answer
        self._grant_at = -math.inf  # ... when (monotonic)
        self._grant_store: Store | None = None  # ... from which store
        self._exchanged_at: dict[Store, float] = {}  # store -> last exchange (monotonic)
        self._pump: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None  # one exchange at a time
        self._renewer: asyncio.Task[None] | None = None

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

    def _store_now(self) -> Store:
        return self.fallback if time.monotonic() < self._down_until else self.store

    def _fell_back(self, exc: StoreDown) -> None:
        if self.on_store_loss == PAUSE:
            if self._lost_since is None:
                self._lost_since = time.monotonic()
        else:
            self._down_until = time.monotonic() + FALLBACK_S
        last = _last_warning.get(self.key, 0.0)
        if time.monotonic() - last >= 60.0:
            _last_warning[self.key] = time.monotonic()
            if self.on_store_loss == PAUSE:
                logger.warning(
                    "rate limiter store unreachable (%s); no new call to endpoint %s starts "
                    "until it is back (ASSAY_LIMITER_ON_STORE_LOSS=pause)",
                    exc,
                    self.key,
                )
            else:
                logger.warning(
                    "rate limiter store unreachable (%s); endpoint %s is limited per process "
                    "for %.0f s (ASSAY_LIMITER_ON_STORE_LOSS=per-process): workers together "
                    "may exceed its limits until it is back",
                    exc,
                    self.key,
                    FALLBACK_S,
                )

    def _store_back(self) -> None:
        """``pause``: the store answered again; new slots wait ``RESYNC_S`` (module doc)."""
        if self._lost_since is not None:
            logger.warning(
                "rate limiter store back after %.1f s; endpoint %s takes new calls in %.1f s",
                time.monotonic() - self._lost_since,
                self.key,
                RESYNC_S,
            )
            self._lost_since = None
            self._resync_until = time.monotonic() + RESYNC_S

    def _held_back(self) -> float:
        """``pause``: seconds before this holder may take a new slot (0.0: now); PROBE_S while
        the store is lost."""
        if self._lost_since is not None:
            return PROBE_S
        return max(0.0, self._resync_until - time.monotonic())

    # -- calls ---------------------------------------------------------------------------

    async def acquire(self, tokens: float = 0.0, *, store_wait_s: float | None = None) -> int:
        """Wait for a slot and the buckets' tokens; returns the call's id for ``release``.
        Cancelling the wait takes nothing. ``store_wait_s``: the longest this call waits while
        the store is unreachable (``pause``), in seconds, counted from the later of the loss
        and the call's first wait; past it raises ``StoreLost`` (None: no bound)."""
        if self._wake is None:
            self._wake = asyncio.Event()
            self._lock = asyncio.Lock()
        store = self._store_now()
        if not self._waiters and self._idle.get(store, 0) > 0 and self._local_ok(store):
            self._idle[store] -= 1
            return self._call_start(store)
        call: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((call, tokens))
        # a pump waiting on a FULL answer has nothing new to ask: it is not woken
        self._kick(wake=False)
        try:
            if store_wait_s is None:
                return await call
            return await self._granted(call, tokens, store_wait_s)
        except asyncio.CancelledError:
            if call.done() and not call.cancelled():  # granted as it was cancelled
                self._call_end(call.result())
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((call, tokens))
            self._kick()
            raise

    async def _granted(self, call: asyncio.Future[int], tokens: float, store_wait_s: float) -> int:
        """``call``'s slot, unless the store has been lost for ``store_wait_s`` of its wait."""
        waiting_since = time.monotonic()
        while True:
            await asyncio.wait({call}, timeout=PROBE_S)
            if call.done():
                return call.result()
            lost = self._lost_since
            if lost is not None and time.monotonic() - max(lost, waiting_since) >= store_wait_s:
                call.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove((call, tokens))
                raise StoreLost(
                    f"the rate limiter's store has been unreachable for {store_wait_s:g} s "
                    f"of this call's wait (endpoint {self.key}); nothing was sent"
                )

    async def release(self, token: int, outcome: Outcome | None = None) -> None:
        """Give back call ``token``'s slot and learn from ``outcome``; what the store must hear at
        once is told before returning."""
        store = self._calls.pop(token, None)
        if store is None:
            return
        self._busy[store] -= 1
        if outcome is not None:
            self._learn(outcome)
        if store is self._store_now() and self._local_ok(store):
            while self._waiters:
                call, _ = self._waiters.popleft()
                if not call.done():
                    call.set_result(self._call_start(store))
                    return
        self._idle[store] = self._idle.get(store, 0) + 1
        if self._urgent and self._lock is not None:
            await self._exchange(store, want=0)  # a 429 is told before anything else
        self._kick()

    def _call_start(self, store: Store) -> int:
        self._next_call += 1
        self._calls[self._next_call] = store
        self._busy[store] = self._busy.get(store, 0) + 1
        return self._next_call

    def _call_end(self, token: int) -> None:
        store = self._calls.pop(token, None)
        if store is not None:
            self._busy[store] -= 1
            self._idle[store] = self._idle.get(store, 0) + 1

    def _learn(self, outcome: Outcome) -> None:
        grant = self._grant
        if _significant(outcome, self._announced):
            self._urgent = True
        elif not (outcome.tokens_delta and grant is not None and grant.paced):
            return  # nothing the store needs
        self._pending = outcome_merge(self._pending, outcome)

    def _local_ok(self, store: Store) -> bool:
        """Whether a slot held may go to another call of this holder without asking the
        store (class doc)."""
        grant = self._grant
        return (
            grant is not None
            and self._lost_since is None
            and self._grant_store is store
            and not self._urgent
            and time.monotonic() - self._grant_at < SYNC_S
            and not grant.paced
            and not grant.yield_all
            and grant.in_flight <= grant.cap
            and (
                not grant.others_waiting
                or self._busy.get(store, 0) + self._idle.get(store, 0) <= grant.share
            )
            and self.now() >= grant.until
        )

    # -- the exchanges with the store ----------------------------------------------------

    def _kick(self, *, wake: bool = True) -> None:
        if self._wake is None:
            return
        if wake:
            self._wake.set()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._pump_loop())

    def _live_waiters(self) -> int:
        while self._waiters and self._waiters[0][0].done():
            self._waiters.popleft()
        return sum(1 for call, _ in self._waiters if not call.done())

    def _hand_out(self, store: Store, slots: int, charged: float | None = None) -> int:
        """Give up to ``slots`` slots of ``store`` to waiting calls; returns how many. ``charged``:
        tokens taken per slot, the surplus returned at the next exchange."""
        given, refund = 0, 0.0
        while given < slots and self._waiters:
            call, tokens = self._waiters.popleft()
            if not call.done():
                call.set_result(self._call_start(store))
                given += 1
                if charged is not None:
                    refund += charged - tokens
        if refund > 0:
            self._pending = outcome_merge(self._pending, Outcome(tokens_delta=-refund))
        return given

    async def _pump_loop(self) -> None:
        try:
            await self._pump_run()
        except BaseException as exc:
            while self._waiters:  # a waiting call must not hang on a dead pump
                call, _ = self._waiters.popleft()
                if not call.done():
                    if isinstance(exc, asyncio.CancelledError):
                        call.cancel()
                    else:
                        call.set_exception(exc)
            raise

    async def _pump_run(self) -> None:
        assert self._wake is not None
        poll = POLL_S
        while True:
            self._wake.clear()
            store = self._store_now()
            for other in [s for s, n in self._idle.items() if n and s is not store]:
                await self._exchange(other, want=0)  # slots of a store no longer used
            want = self._live_waiters()
            idle = self._idle.get(store, 0)
            if want and idle and self._local_ok(store):
                self._idle[store] -= self._hand_out(store, min(want, idle))
                continue
            if not want:
                if not idle and not self._urgent:
                    return
                if idle and not self._urgent and self._local_ok(store):
                    # the holder's next call may want it at once
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), LINGER_S)
                    if self._live_waiters() or not self._idle.get(store, 0):
                        continue
                if await self._exchange(store, want=0) is None and self.on_store_loss == PAUSE:
                    await asyncio.sleep(PROBE_S)  # a 429 still to tell: ask again, not at once
                continue
            held_back = self._held_back()
            if held_back > 0:  # pause: the store lost, or counting its holders' calls again
                await self._exchange(store, want=0)
                await asyncio.sleep(min(held_back, self._held_back() or held_back))
                continue
            grant = await self._exchange(store, want=want)
            if grant is None and self.on_store_loss == PAUSE:
                continue  # lost now: held back above
            if grant is None or grant.granted >= want:
                poll = POLL_S
                continue
            if grant.wait > 0:  # a pause or a bucket
                await self._wait(min(grant.wait, MAX_WAIT_STEP_S))
                continue
            with contextlib.suppress(TimeoutError):  # FULL: a release here or a poll
                await asyncio.wait_for(self._wake.wait(), poll)
            limit = SYNC_S if self._busy.get(store, 0) else MAX_POLL_S
            poll = min(poll * 1.5, limit)

    async def _exchange(self, store: Store, *, want: int) -> Grant | None:
        """One round trip: return idle slots, tell what was learnt, renew the lease, take up to
        ``want``. None when the store is down (the process store stands in)."""
        assert self._lock is not None
        async with self._lock:
            self._idle[store] = 0  # given back: the store now counts only the busy ones
            outcome, urgent = self._pending, self._urgent
            self._pending, self._urgent = None, False
            # every call granted is charged the most any waiting one asks for (its own
            # estimate is given back, ``_hand_out``)
            tokens = max((t for call, t in self._waiters if not call.done()), default=0.0)
            ask = Ask(
                capacity=self.capacity,
                rpm=self.rpm,
                tpm=self.tpm,
                tokens=tokens,
                lease_s=self.lease_s,
            )
            self.round_trips += 1
            try:
                grant = await store.exchange(
                    self.key,
                    self.holder,
                    self.now(),
                    ask,
                    keep=self._busy.get(store, 0),
                    want=want,
                    outcome=outcome,
                )
            except StoreDown as exc:
                self._fell_back(exc)
                self._pending = outcome_merge(outcome, self._pending)  # told to the next one
                self._urgent = self._urgent or urgent
                return None
            if store is self.store:
                self._store_back()
            if outcome is not None:
                self._announced = (
                    outcome.rpm_limit or self._announced[0],
                    outcome.tpm_limit or self._announced[1],
                )
            self._grant, self._grant_at, self._grant_store = grant, time.monotonic(), store
            self._exchanged_at[store] = time.monotonic()
            charged = tokens if grant.paced and tokens > 0 else None
            extra = grant.granted - self._hand_out(store, grant.granted, charged)
            if extra:  # the calls it was for were cancelled meanwhile
                self._idle[store] = self._idle.get(store, 0) + extra
            self._renew_start()
            return grant

    def _renew_start(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_loop())

    def _holding(self) -> list[Store]:
        stores = set(self._busy) | set(self._idle)
        return [s for s in stores if self._busy.get(s, 0) + self._idle.get(s, 0) > 0]

    async def _renew_loop(self) -> None:
        while self._holding():
            lost = self._lost_since is not None
            # pause: a lost store is asked every PROBE_S, so it counts these calls again at once
            await asyncio.sleep(PROBE_S if lost else self.lease_s / 3)
            for store in self._holding():
                stale = time.monotonic() - self._exchanged_at.get(store, 0.0) >= self.lease_s / 4
                if stale or (self._lost_since is not None and store is self.store):
                    await self._exchange(store, want=0)

    async def aclose(self) -> None:
        """Give back every slot, stop, close the store's client."""
        for task in (self._pump, self._renewer):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for store in self._holding():
            self._calls = {t: s for t, s in self._calls.items() if s is not store}
            self._busy[store] = 0
            if self._lock is not None:
                await self._exchange(store, want=0)
        if self.store is not self.fallback:
            await self.store.aclose()


__all__ = [
    "SEND_HOOK",
    "STORE_LOST_KIND",
    "Limiter",
    "Outcome",
    "StoreLost",
    "call_sending",
    "endpoint_key",
    "store_default",
]
