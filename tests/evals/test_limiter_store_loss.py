"""The limiter while its store is unreachable (providers.limiter, docs/rate-limits.md "When
the store is down"): under ``pause`` (the default) two holders of one endpoint never put
more than its ``concurrency`` in flight through an outage, start no new call until the
store is back, count each other's calls again after it (leases expired meanwhile
included), and a waiting call ends at its budget (``StoreLost``, kind
``limiter_unavailable``, nothing sent) or at a cancel; under ``per-process`` each process
limits on its own. The store here is a fake one that fails on demand (``FlakyStore``);
tests/evals/test_worker_store_loss.py does the same with real workers and Redis."""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid

import pytest

from providers.call_stop import CALL_STOP
from providers.endpoint import EndpointConfig
from providers.limiter import PROBE_S, RESYNC_S, Limiter, StoreLost
from providers.limiter.rules import Outcome
from providers.limiter.stores import MemoryStore, StoreDown
from providers.openai.client import ChatClient
from providers.transport import HttpAnswer


class FlakyStore:
    """A ``MemoryStore`` shared by every holder that raises ``StoreDown`` while ``down``."""

    name = "flaky"

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.down = False
        self.failures = 0

    async def exchange(self, key, holder, now, ask, *, keep, want=0, outcome=None):
        await asyncio.sleep(0)  # a real store's round trip yields to the loop
        if self.down:
            self.failures += 1
            raise StoreDown("fake: unreachable")
        return await self.inner.exchange(
            key, holder, now, ask, keep=keep, want=want, outcome=outcome
        )

    async def aclose(self) -> None:
        pass


class Calls:
    """Calls through limiters of one endpoint: in flight now and at most, and when each
    started (monotonic)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.starts: list[float] = []
        self.done = 0

    async def loop(self, limiter: Limiter, stop: asyncio.Event, call_s: float, rng) -> None:
        while not stop.is_set():
            slot = await limiter.acquire()
            self.starts.append(time.monotonic())
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(call_s * rng.uniform(0.5, 1.5))
            self.in_flight -= 1
            self.done += 1
            await limiter.release(slot, Outcome())


def _key() -> str:
    return f"test-{uuid.uuid4().hex}"


def _outage(mode: str, *, lease_s: float = 10.0):
    """Two holders (two workers: a fallback store each) at concurrency 4, 8 calls each always
    waiting; the store goes down for 1 s. Returns (calls, outage start, outage end, calls
    in flight when it went down)."""

    async def go():
        key, store, rng, calls, stop = _key(), FlakyStore(), random.Random(5), Calls(), None
        stop = asyncio.Event()
        limiters = [
            Limiter(
                key=key,
                capacity=4,
                store=store,
                on_store_loss=mode,
                fallback=MemoryStore(),
                lease_s=lease_s,
            )
            for _ in range(2)
        ]
        tasks = [
            asyncio.ensure_future(calls.loop(limiters[n], stop, 0.03, rng))
            for n in range(2)
            for _ in range(8)
        ]
        await asyncio.sleep(0.5)
        store.down, down_at, in_flight = True, time.monotonic(), calls.in_flight
        await asyncio.sleep(1.0)
        store.down, up_at = False, time.monotonic()
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        for limiter in limiters:
            await limiter.aclose()
        return calls, down_at, up_at, in_flight

    return asyncio.run(go())


def test_under_pause_two_holders_never_exceed_the_concurrency_through_an_outage(caplog):
    with caplog.at_level(logging.WARNING, logger="providers.limiter"):
        calls, down_at, up_at, in_flight = _outage("pause")

    assert calls.peak == 4
    assert in_flight > 0  # the outage began with calls in flight, and they finished
    # no new call once the holders saw the store gone (a slot already held may pass to the
    # holder's next call for SYNC_S; a busy loop may run it a little later), none before
    # RESYNC_S after it came back
    late = [t - down_at for t in calls.starts if down_at + 0.5 < t < up_at + RESYNC_S - 0.05]
    assert late == [], (late, up_at - down_at)
    assert any(t > up_at for t in calls.starts)  # and calls resume
    messages = [r.getMessage() for r in caplog.records]
    assert any("no new call" in m and "pause" in m for m in messages), messages
    assert any("store back" in m for m in messages), messages


def test_under_per_process_each_holder_limits_alone_and_the_total_exceeds_it(caplog):
    with caplog.at_level(logging.WARNING, logger="providers.limiter"):
        calls, down_at, up_at, _ = _outage("per-process")

    assert calls.peak > 4  # each process its own 4, beside the calls granted before
    assert any(down_at + 0.2 < t < up_at for t in calls.starts)
    assert any("per-process" in r.getMessage() for r in caplog.records)


def test_after_an_outage_longer_than_the_lease_the_calls_in_flight_are_counted_again():
    """Holder A's 4 calls outlive an outage longer than their lease (the store forgets them);
    B waits through it: B gets no slot while A's calls run, then all 4."""

    async def go():
        key, store = _key(), FlakyStore()
        a, b = (
            Limiter(key=key, capacity=4, store=store, on_store_loss="pause", lease_s=0.3)
            for _ in range(2)
        )
        held = [await a.acquire() for _ in range(4)]
        store.down = True
        waiting = [asyncio.ensure_future(b.acquire()) for _ in range(4)]
        await asyncio.sleep(1.0)  # 3 leases
        store.down = False
        up_at = time.monotonic()
        await asyncio.sleep(RESYNC_S + 0.5)
        early = sum(w.done() for w in waiting)
        for slot in held:
            await a.release(slot)
        got = await asyncio.wait_for(asyncio.gather(*waiting), 3)
        took = time.monotonic() - up_at
        for slot in got:
            await b.release(slot)
        await a.aclose()
        await b.aclose()
        return early, len(got), took

    early, got, took = asyncio.run(go())
    assert early == 0
    assert got == 4
    assert took < RESYNC_S + 2


def test_a_call_that_waits_for_a_lost_store_past_its_budget_raises_store_lost():
    async def go():
        store = FlakyStore()
        store.down = True
        limiter = Limiter(key=_key(), capacity=2, store=store, on_store_loss="pause")
        started = time.monotonic()
        with pytest.raises(StoreLost, match="unreachable for 0.6 s"):
            await limiter.acquire(store_wait_s=0.6)
        waited = time.monotonic() - started
        store.down = False
        again = await asyncio.wait_for(limiter.acquire(), 3)  # nothing was taken
        await limiter.release(again)
        await limiter.aclose()
        return waited, store.failures

    waited, failures = asyncio.run(go())
    assert 0.6 <= waited < 1.5
    assert failures >= 2  # asked again while it waited


def test_a_cancel_ends_a_wait_for_a_lost_store_and_takes_nothing():
    async def go():
        store = FlakyStore()
        store.down = True
        limiter = Limiter(key=_key(), capacity=1, store=store, on_store_loss="pause")
        waiting = asyncio.ensure_future(limiter.acquire(store_wait_s=60))
        await asyncio.sleep(0.3)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        store.down = False
        again = await asyncio.wait_for(limiter.acquire(), 3)
        await limiter.release(again)
        await limiter.aclose()
        return waiting.cancelled()

    assert asyncio.run(go())


def test_a_429_still_to_tell_a_lost_store_is_told_every_probe_not_in_a_spin():
    """No call waits, a 429's outcome must reach the store, and the store is down: the
    holder asks it again every PROBE_S, and tells it once it is back."""

    async def go():
        store = FlakyStore()
        key = _key()
        limiter = Limiter(key=key, capacity=2, store=store, on_store_loss="pause")
        slot = await limiter.acquire()
        store.down = True
        await limiter.release(slot, Outcome(limited=True, retry_after_s=30.0))
        await asyncio.sleep(1.0)
        failures = store.failures
        store.down = False
        await asyncio.sleep(2 * PROBE_S + 0.1)
        paused = store.inner.states[key].get("until", 0) > time.time() + 20
        await limiter.aclose()
        return failures, paused

    failures, paused = asyncio.run(go())
    assert 2 <= failures <= 12  # about one a PROBE_S (0.25 s) for 1 s, never a spin
    assert paused  # the 429's pause reached the store once it was back


class CountingPoster:
    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def post(self, body: dict) -> HttpAnswer:
        self.bodies.append(body)
        return HttpAnswer(
            status=200, headers={}, text='{"choices": [{"message": {"content": "hi"}}]}'
        )

    async def aclose(self) -> None:
        pass


def _client(timeout_s: float, store: FlakyStore) -> tuple[ChatClient, CountingPoster]:
    config = EndpointConfig(
        base_url="http://127.0.0.1:9/v1",
        model="m",
        api_key_env=None,
        concurrency=2,
        timeout_s=timeout_s,
    )
    client = ChatClient(config)
    client.limiter = Limiter(key=_key(), capacity=2, store=store, on_store_loss="pause")
    poster = CountingPoster()
    client.http = poster  # type: ignore[assignment]
    return client, poster


def test_a_call_that_waited_past_its_timeout_for_the_store_errors_unsent():
    async def go():
        store = FlakyStore()
        store.down = True
        client, poster = _client(0.5, store)
        reply = await client.send({"model": "m", "messages": [{"role": "user", "content": "q"}]})
        store.down = False
        after = await client.send({"model": "m", "messages": [{"role": "user", "content": "q"}]})
        await client.aclose()
        return reply, after, poster

    reply, after, poster = asyncio.run(go())
    assert not reply.ok
    assert reply.error_kind == "limiter_unavailable"
    assert reply.attempts == 0
    assert "nothing was sent" in reply.error
    assert after.ok and after.output == "hi"
    assert len(poster.bodies) == 1  # only the call made once the store was back


def test_a_cancelled_run_stops_a_call_waiting_for_a_lost_store():
    async def go():
        store = FlakyStore()
        store.down = True
        client, poster = _client(60, store)
        stop = asyncio.Event()
        CALL_STOP.set(stop)
        sending = asyncio.ensure_future(
            client.send({"model": "m", "messages": [{"role": "user", "content": "q"}]})
        )
        await asyncio.sleep(0.3)
        stop.set()
        reply = await asyncio.wait_for(sending, 2)
        await client.aclose()
        return reply, poster

    reply, poster = asyncio.run(go())
    assert reply.error_kind == "cancelled"
    assert poster.bodies == []
