"""The shared limiter (providers.limiter): its rules on every store (in-process, the
SQLite file, Redis when REDIS_URL is set), the Lua rules held to the Python ones, a dead
holder's slots coming back, the token buckets' rate, 429 pauses and the slow-down, fair
shares and no starvation between holders, the announced limits learnt or not, slots handed
on without a round trip, the header reading, and a store outage."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid

import pytest

from providers.limiter import SYNC_S, Limiter, endpoint_key
from providers.limiter.headers import duration_seconds, outcome_read
from providers.limiter.rules import FULL, RECOVER_S, SAFETY, STARVE_S, Ask, Outcome
from providers.limiter.stores import PROCESS_STORE, MemoryStore, RedisStore, SqliteStore

REDIS_URL = os.environ.get("REDIS_URL", "")


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        yield SqliteStore(tmp_path / "limiter.sqlite3")
    else:
        if not REDIS_URL:
            pytest.skip("REDIS_URL not set")
        yield RedisStore(REDIS_URL)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def stores(request, tmp_path):
    """Makes a store of one kind per call: each worker's own client of the shared state."""
    if request.param == "memory":
        shared = MemoryStore()
        yield lambda: shared
    elif request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "limiter.sqlite3")
    else:
        if not REDIS_URL:
            pytest.skip("REDIS_URL not set")
        yield lambda: RedisStore(REDIS_URL)


def _key() -> str:
    return f"test-{uuid.uuid4().hex}"


def run(coro):
    return asyncio.run(coro)


async def _closing(store, coro):
    try:
        return await coro
    finally:
        await store.aclose()


async def ex(store, key, holder, now, ask, *, keep=0, want=1, outcome=None):
    """One exchange; its ``wait`` when nothing was granted, else the slots granted."""
    return await store.exchange(key, holder, now, ask, keep=keep, want=want, outcome=outcome)


async def take(store, key, holder, now, ask, *, keep=0):
    """One slot for ``holder`` (keeping ``keep``): 0.0 when granted, else the answer's wait
    (the old acquire's answer)."""
    grant = await ex(store, key, holder, now, ask, keep=keep)
    return 0.0 if grant.granted == 1 else grant.wait


def test_no_more_than_capacity_slots_are_granted_and_a_release_frees_one(store):
    async def go():
        key, now = _key(), time.time()
        first = await ex(store, key, "h", now, Ask(capacity=3), want=4)
        again = await ex(store, key, "h", now, Ask(capacity=3), keep=3, want=1)
        freed = await ex(store, key, "h", now, Ask(capacity=3), keep=2, want=1)
        return first, again, freed

    first, again, freed = run(_closing(store, go()))
    assert (first.granted, first.wait, first.held, first.in_flight) == (3, FULL, 3, 3)
    assert (again.granted, again.wait) == (0, FULL)
    assert (freed.granted, freed.wait, freed.held) == (1, 0.0, 3)


def test_a_dead_holders_slots_come_back_when_its_lease_expires(store):
    async def go():
        key, now = _key(), time.time()
        first = await ex(store, key, "dead", now, Ask(capacity=2, lease_s=5), want=2)
        while_held = await take(store, key, "live", now + 4.9, Ask(capacity=2))
        after = await ex(store, key, "live", now + 5.1, Ask(capacity=2), want=2)
        return first.granted, while_held, after.granted

    assert run(_closing(store, go())) == (2, FULL, 2)


def test_a_renewed_lease_does_not_expire(store):
    async def go():
        key, now = _key(), time.time()
        await ex(store, key, "holder", now, Ask(capacity=1, lease_s=5))
        await ex(store, key, "holder", now + 4, Ask(capacity=1, lease_s=5), keep=1, want=0)
        return await take(store, key, "other", now + 8, Ask(capacity=1))

    assert run(_closing(store, go())) == FULL


def test_the_request_bucket_keeps_the_rate_under_the_declared_rpm(store):
    """600 rpm: the bucket starts empty, then SAFETY x 10 requests a second; over 60 s of
    the store's clock, as many grants as 60 s of the rate, asked one by one or many at a
    time."""

    async def go(want):
        key, start = _key(), time.time()
        now, granted = start, 0
        while now < start + 60:
            grant = await ex(store, key, "h", now, Ask(capacity=1000, rpm=600), want=want)
            granted += grant.granted
            if grant.granted < want:
                assert grant.wait > 0
                now += grant.wait
        return granted

    async def both():
        return await go(1), await go(5)

    one_by_one, five = run(_closing(store, both()))
    expected = SAFETY * 10 * 60
    assert expected - 2 <= one_by_one <= expected + 1
    assert expected - 5 <= five <= expected + 1


def test_a_worker_with_an_earlier_clock_does_not_refill_the_bucket_twice(store):
    """Workers' calls interleave: one asking with an earlier time than the last count must
    not move the count back (the refill since then would be counted twice)."""

    async def go():
        key, t = _key(), time.time()
        ask = Ask(capacity=1000, rpm=600)  # 9.8 a second, starting empty
        await take(store, key, "first", t, ask)
        granted = 0
        for i, at in enumerate([t + 1.0] * 12 + [t + 0.5] * 12 + [t + 1.0] * 12):
            granted += await take(store, key, f"h{i}", at, ask) == 0.0
        return granted

    assert run(_closing(store, go())) == 9  # one second of refill, once


def test_the_token_bucket_waits_for_a_calls_tokens_and_is_corrected_by_usage(store):
    async def go():
        key, now = _key(), time.time()
        ask = Ask(capacity=100, tpm=6000, tokens=60)  # 98 tokens a second, starts empty
        first = await take(store, key, "a", now, ask)  # wait for 60
        now += first
        granted = await take(store, key, "a", now, ask)
        now += 1.0  # full again: 98
        await take(store, key, "b", now, ask)
        second = await take(store, key, "c", now, ask)  # 38 left: wait for 22 more
        # "b" really used 10: 50 given back, "c" fits at once
        await ex(store, key, "b", now, ask, want=0, outcome=Outcome(tokens_delta=-50))
        third = await take(store, key, "c", now, ask)
        return first, granted, second, third

    first, granted, second, third = run(_closing(store, go()))
    assert first == pytest.approx(60 / (SAFETY * 100), rel=1e-3)
    assert granted == 0.0
    assert second == pytest.approx(22 / (SAFETY * 100), rel=1e-3)
    assert third == 0.0


def test_a_429_pauses_the_endpoint_for_retry_after_then_halves_and_recovers(store):
    async def go():
        key, now = _key(), time.time()
        assert (await ex(store, key, "h", now, Ask(capacity=8), want=8)).granted == 8
        limited = Outcome(limited=True, retry_after_s=2.0)
        for held in range(7, -1, -1):  # eight 429s, told one by one
            await ex(store, key, "h", now, Ask(capacity=8), keep=held, want=0, outcome=limited)
        paused = await take(store, key, "p", now + 1, Ask(capacity=8))
        after = await ex(store, key, "a", now + 2.01, Ask(capacity=8), want=5)
        later = now + 2.01 + RECOVER_S / 2
        recovered = await ex(store, key, "a", later, Ask(capacity=8), keep=4, want=4)
        return paused, after, recovered

    paused, after, recovered = run(_closing(store, go()))
    assert paused == pytest.approx(1.0, abs=1e-3)
    # eight 429s at once halve once (DECREASE_SPACING_S): 4 slots of 8
    assert (after.granted, after.wait, after.cap) == (4, FULL, 4)
    # RECOVER_S / 2 later the factor is back to 1: 8 slots, 4 held
    assert (recovered.granted, recovered.cap) == (4, 8)


def test_a_429_announcing_a_new_limit_teaches_it_instead_of_halving(store):
    async def go():
        key, now = _key(), time.time()
        await take(store, key, "t", now, Ask(capacity=4))
        outcome = Outcome(limited=True, retry_after_s=0.01, rpm_limit=600)
        await ex(store, key, "t", now, Ask(capacity=4), want=0, outcome=outcome)
        # the request bucket is empty (the provider's is): one request every 1 / 9.8 s
        first = await take(store, key, "a", now + 0.02, Ask(capacity=4))
        granted = await take(store, key, "a", now + 1 / (SAFETY * 10), Ask(capacity=4))
        slots = await ex(store, key, "s", now + 5, Ask(capacity=4), want=4)
        return first, granted, slots

    first, granted, slots = run(_closing(store, go()))
    assert first == pytest.approx((1 - 0.02 * SAFETY * 10) / (SAFETY * 10), rel=1e-3)
    assert granted == 0.0
    assert (slots.cap, slots.paced) == (4, True)  # the factor was not halved
    assert slots.granted == 3  # 4 slots, "a" holds one


def test_an_announced_rpm_below_the_calls_sent_last_minute_is_not_learnt(store):
    """The shared mock with ``--max-inflight 128`` only answers the 129th call in flight 429
    announcing ``x-ratelimit-limit-requests: 128``: 129 calls went in the last second, so
    128 is no limit on requests per minute (learnt, it would pace the endpoint at 2 a
    second). A 429 announcing 6,000 is learnt."""

    async def go():
        key, now = _key(), time.time()
        await ex(store, key, "h", now, Ask(capacity=256), want=129)
        inflight = Outcome(
            limited=True, retry_after_s=0.0, rpm_limit=128, remaining_requests=0,
            reset_requests_s=0.0,
        )  # fmt: skip
        kept = await ex(store, key, "h", now, Ask(capacity=256), keep=128, want=1, outcome=inflight)
        rpm = Outcome(limited=True, retry_after_s=0.0, rpm_limit=6000)
        learnt = await ex(store, key, "h", now, Ask(capacity=256), keep=128, want=0, outcome=rpm)
        return kept, learnt

    kept, learnt = run(_closing(store, go()))
    assert not kept.paced  # not learnt: only slowed down (the factor halved)
    assert kept.cap == 128
    assert learnt.paced


def test_no_remaining_requests_pauses_until_the_announced_reset(store):
    async def go():
        key, now = _key(), time.time()
        await take(store, key, "t", now, Ask(capacity=4))
        outcome = Outcome(remaining_requests=0, reset_requests_s=3.0)
        await ex(store, key, "t", now, Ask(capacity=4), want=0, outcome=outcome)
        return await take(store, key, "u", now + 1, Ask(capacity=4))

    assert run(_closing(store, go())) == pytest.approx(2.0, abs=1e-3)


def test_while_another_holder_waits_a_holder_keeps_no_more_than_its_share(store):
    """Worker A holds all 64 slots; B asks and waits. A is told B waits and its share (32):
    it gives back what its calls free and is granted nothing past 32; B is granted up to
    32."""

    async def go():
        key, now = _key(), time.time()
        ask = Ask(capacity=64)
        a = await ex(store, key, "A", now, ask, want=64)
        b = await ex(store, key, "B", now, ask, want=64)
        a_told = await ex(store, key, "A", now + 0.01, ask, keep=64, want=0)
        a_back = await ex(store, key, "A", now + 0.02, ask, keep=20, want=30)
        b_more = await ex(store, key, "B", now + 0.03, ask, want=64)
        return a, b, a_told, a_back, b_more

    a, b, a_told, a_back, b_more = run(_closing(store, go()))
    assert (a.granted, a.others_waiting) == (64, False)
    assert (b.granted, b.wait) == (0, FULL)
    assert (a_told.others_waiting, a_told.share, a_told.held) == (True, 32, 64)
    assert (a_back.granted, a_back.held) == (12, 32)  # up to its share
    assert (b_more.granted, b_more.held, b_more.in_flight) == (32, 32, 64)


def test_a_caller_with_a_smaller_concurrency_is_not_starved(store):
    """A judge (concurrency 8) shares the endpoint with a target (64) that keeps 64 in
    flight: the judge waits; once it has waited ``STARVE_S`` it goes first: the target is
    told to yield and granted nothing, and the judge is granted as soon as fewer than 8
    are in flight."""

    async def go():
        key, now = _key(), time.time()
        target, judge = Ask(capacity=64), Ask(capacity=8)
        await ex(store, key, "T", now, target, want=64)
        waits = await ex(store, key, "J", now, judge, want=2)
        early = await ex(store, key, "J", now + STARVE_S / 2, judge, want=2)  # it polls
        told = await ex(store, key, "T", now + STARVE_S + 0.01, target, keep=63, want=1)
        starved = await ex(store, key, "J", now + STARVE_S + 0.02, judge, want=2)
        drained = await ex(store, key, "T", now + STARVE_S + 0.03, target, keep=6, want=0)
        granted = await ex(store, key, "J", now + STARVE_S + 0.04, judge, want=2)
        after = await ex(store, key, "T", now + STARVE_S + 0.05, target, keep=6, want=10)
        return waits, early, told, starved, drained, granted, after

    waits, early, told, starved, drained, granted, after = run(_closing(store, go()))
    assert (waits.granted, waits.wait) == (0, FULL)
    assert early.yield_all is False
    # the target, past STARVE_S: granted nothing, told to yield
    assert (told.granted, told.yield_all) == (0, True)
    assert starved.granted == 0  # 63 in flight: not yet
    assert drained.yield_all
    assert (granted.granted, granted.in_flight) == (2, 8)  # 6 in flight: room for its 2
    assert (after.granted, after.yield_all) == (10, False)  # then the target goes on


def test_the_lua_rules_answer_as_the_python_rules_do(tmp_path):
    """One random scenario of three holders' exchanges (slots kept and wanted, every kind
    of outcome, time steps), played on the in-process store and on Redis: the same
    answers."""
    if not REDIS_URL:
        pytest.skip("REDIS_URL not set")
    rng = random.Random(11)
    key = _key()
    steps = []
    now = float(int(time.time()))  # whole seconds plus steps of milliseconds
    for _ in range(500):
        now += rng.choice([0.0, 0.001, 0.001, 0.01, 0.05, 0.05, 0.3, 0.6, 2.5])
        holder = rng.choice("abc")
        outcome = rng.choice(
            [None] * 8
            + [
                Outcome(tokens_delta=rng.uniform(-30, 30)),
                Outcome(limited=True, retry_after_s=rng.choice([None, 0.05, 0.2])),
                Outcome(limited=True, retry_after_s=0.05, rpm_limit=rng.choice([60, 600, 1200])),
                Outcome(remaining_requests=0, reset_requests_s=0.1, tpm_limit=200000),
            ]
        )
        ask = Ask(
            capacity={"a": 12, "b": 12, "c": 3}[holder],  # "c": a judge beside two workers
            rpm=rng.choice([None, None, 900]),
            tpm=rng.choice([None, None, 300000]),
            tokens=rng.uniform(0, 400),
            lease_s=rng.choice([1.0, 30.0]),
        )
        keep = rng.choice([1.0, 1.0, 1.0, 0.7, 0.3, 0.0])  # the share of its slots it keeps
        steps.append((holder, now, ask, keep, rng.choice([0, 1, 1, 2, 5]), outcome))

    async def play(store):
        answers = []
        try:
            for holder, at, ask, keep, want, outcome in steps:
                answers.append(
                    await store.exchange(
                        key, holder, at, ask, keep=keep, want=want, outcome=outcome
                    )
                )
        finally:
            await store.aclose()
        return answers

    def played(answers):
        return [
            (a.granted, a.held, a.in_flight, a.cap, a.share, a.others_waiting, a.yield_all, a.paced)
            for a in answers
        ]

    # the scenario's keeps follow the in-process answers (what each holder then holds)
    python_answers = []
    memory = MemoryStore()
    held = {"a": 0, "b": 0, "c": 0}
    for i, (holder, at, ask, keep, want, outcome) in enumerate(steps):
        keep = int(keep * held[holder])
        steps[i] = (holder, at, ask, keep, want, outcome)
        answer = run(memory.exchange(key, holder, at, ask, keep=keep, want=want, outcome=outcome))
        held[holder] = answer.held
        python_answers.append(answer)
    lua_answers = run(play(RedisStore(REDIS_URL)))
    assert len(python_answers) == len(lua_answers) == 500
    # the scenario grants batches, fills, waits, has holders waiting and one starving
    assert sum(1 for a in python_answers if a.granted > 1) > 20
    assert sum(1 for a in python_answers if a.wait == FULL) > 20
    assert sum(1 for a in python_answers if a.wait > 0) > 50
    assert sum(1 for a in python_answers if a.others_waiting) > 20
    assert sum(1 for a in python_answers if a.yield_all) > 0
    assert played(lua_answers) == played(python_answers)
    assert [a.wait for a in lua_answers] == pytest.approx(
        [a.wait for a in python_answers], abs=1e-4
    )
    assert [a.until for a in lua_answers] == pytest.approx(
        [a.until for a in python_answers], abs=1e-4
    )


class Calls:
    """Calls through limiters of one endpoint, counted: in flight now and at most, per
    limiter."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.started = 0
        self.peak = 0
        self.done: dict[int, int] = {}
        self.holding: dict[int, int] = {}

    async def loop(self, limiter, n: int, stop: asyncio.Event, call_s: float, rng) -> None:
        while not stop.is_set():
            slot = await limiter.acquire()
            self.started += 1
            self.in_flight += 1
            self.holding[n] = self.holding.get(n, 0) + 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(call_s * rng.uniform(0.5, 1.5))
            self.in_flight -= 1
            self.holding[n] -= 1
            self.done[n] = self.done.get(n, 0) + 1
            await limiter.release(slot, Outcome())


def test_a_finished_calls_slot_goes_to_the_next_call_without_asking_the_store(stores):
    """Two limiters (two workers) at concurrency 16, 24 calls each always waiting: never
    more than 16 in flight in all, both get calls through, and most calls take the slot of
    one just finished without a round trip to the store (an attempt cost two before)."""

    async def go():
        key, rng, calls, stop = _key(), random.Random(3), Calls(), asyncio.Event()
        limiters = [Limiter(key=key, capacity=16, store=stores()) for _ in range(2)]
        tasks = [
            asyncio.ensure_future(calls.loop(limiters[n], n, stop, 0.004, rng))
            for n in range(2)
            for _ in range(24)
        ]
        await asyncio.sleep(1.5)
        stop.set()
        await asyncio.gather(*tasks)
        trips = sum(limiter.round_trips for limiter in limiters)
        for limiter in limiters:
            await limiter.aclose()
        return calls, trips

    calls, trips = run(go())
    attempts = sum(calls.done.values())
    assert calls.peak == 16
    assert attempts > 1000
    assert min(calls.done.values()) > attempts / 5
    assert trips < attempts / 4


def test_a_limiter_holding_every_slot_shares_them_with_a_worker_that_comes_later(stores):
    """Worker A's 16 calls in a row hold all 16 slots, each handing its slot to the next;
    B's 16 start asking: from half a second on, B's calls are about half of those made
    (before: none on the in-process and SQLite stores, A's release let A's next call in
    first), and never more than 16 are in flight."""

    async def go():
        key, rng, calls, stop = _key(), random.Random(5), Calls(), asyncio.Event()
        a, b = (Limiter(key=key, capacity=16, store=stores()) for _ in range(2))
        tasks = [asyncio.ensure_future(calls.loop(a, 0, stop, 0.002, rng)) for _ in range(16)]
        for _ in range(300):  # A's first calls (the store's first answer: its connection)
            if calls.done.get(0, 0) > 16:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        tasks += [asyncio.ensure_future(calls.loop(b, 1, stop, 0.002, rng)) for _ in range(16)]
        await asyncio.sleep(0.5)
        before = dict(calls.done)
        await asyncio.sleep(1.0)
        after = dict(calls.done)
        stop.set()
        await asyncio.gather(*tasks)
        await a.aclose()
        await b.aclose()
        made = {n: after.get(n, 0) - before.get(n, 0) for n in (0, 1)}
        return made, calls.peak

    made, peak = run(go())
    assert peak == 16
    assert made[1] >= 0.3 * (made[0] + made[1]), made


def test_a_judge_with_a_smaller_concurrency_gets_slots_beside_a_busy_target(stores):
    """A target at concurrency 16 keeps 16 calls in flight; a judge at 4 (which may only
    send while fewer than 4 are in flight) gets its calls through within a second each
    (before: never, as long as the target had calls to send)."""

    async def go():
        key, rng, calls, stop = _key(), random.Random(9), Calls(), asyncio.Event()
        target = Limiter(key=key, capacity=16, store=stores())
        judge = Limiter(key=key, capacity=4, store=stores())
        tasks = [asyncio.ensure_future(calls.loop(target, 0, stop, 0.02, rng)) for _ in range(32)]
        await asyncio.sleep(0.3)
        waits = []
        for _ in range(3):
            started = time.monotonic()
            slot = await asyncio.wait_for(judge.acquire(), 5)
            waits.append(time.monotonic() - started)
            await asyncio.sleep(0.02)
            await judge.release(slot, Outcome())
        stop.set()
        await asyncio.gather(*tasks)
        await target.aclose()
        await judge.aclose()
        return waits, calls.peak

    waits, peak = run(go())
    assert max(waits) < 1.0 + STARVE_S
    assert peak <= 16


def test_a_429_at_one_worker_pauses_another_that_hands_slots_on_locally(stores):
    """Worker B's calls hand their slots on without asking the store; A is answered 429
    with a 1 s Retry-After: within ``SYNC_S`` B sends nothing more until the pause ends."""

    async def go():
        key, rng, calls, stop = _key(), random.Random(1), Calls(), asyncio.Event()
        a, b = (Limiter(key=key, capacity=8, store=stores()) for _ in range(2))
        tasks = [asyncio.ensure_future(calls.loop(b, 1, stop, 0.005, rng)) for _ in range(8)]
        await asyncio.sleep(0.3)
        slot = await a.acquire()
        await a.release(slot, Outcome(limited=True, retry_after_s=1.0))
        limited_at = time.monotonic()
        await asyncio.sleep(SYNC_S + 0.05)
        done_then = calls.done[1]
        await asyncio.sleep(0.5)
        done_in_pause = calls.done[1] - done_then
        await asyncio.sleep(1.0 - (time.monotonic() - limited_at) + 0.3)
        done_after = calls.done[1] - done_then - done_in_pause
        stop.set()
        await asyncio.gather(*tasks)
        await a.aclose()
        await b.aclose()
        return done_in_pause, done_after

    done_in_pause, done_after = run(go())
    assert done_in_pause == 0
    assert done_after > 0


def test_a_declared_rpm_counts_every_call_even_when_granted_many_at_once(stores):
    """rpm 1,200 (19.6 a second at SAFETY, the bucket starting empty): two limiters with 16
    calls each waiting get no more than the bucket's rate through in 1.5 s."""

    async def go():
        key, rng, calls, stop = _key(), random.Random(2), Calls(), asyncio.Event()
        limiters = [Limiter(key=key, capacity=64, rpm=1200, store=stores()) for _ in range(2)]
        tasks = [
            asyncio.ensure_future(calls.loop(limiters[n], n, stop, 0.002, rng))
            for n in range(2)
            for _ in range(16)
        ]
        started = time.monotonic()
        await asyncio.sleep(1.5)
        done, elapsed = calls.started, time.monotonic() - started
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for limiter in limiters:
            await limiter.aclose()
        return done, elapsed

    done, elapsed = run(go())
    rate = SAFETY * 1200 / 60
    assert rate * 1.5 * 0.7 <= done <= rate * elapsed + 2


def test_a_limiter_shares_its_slots_with_another_instance_of_the_endpoint(tmp_path):
    """Two limiters of one endpoint (two workers' targets) on one store: capacity is their
    total; a release by one lets the other in."""
    path = tmp_path / "limiter.sqlite3"

    async def go():
        key = _key()
        one = Limiter(key=key, capacity=2, store=SqliteStore(path))
        two = Limiter(key=key, capacity=2, store=SqliteStore(path))
        a = await one.acquire()
        await two.acquire()
        waiting = asyncio.ensure_future(two.acquire())
        await asyncio.sleep(0.1)
        blocked = not waiting.done()
        await one.release(a)
        got = await asyncio.wait_for(waiting, 2)
        await one.aclose()
        await two.aclose()
        return blocked, got

    blocked, got = run(go())
    assert blocked
    assert got


def test_cancelling_a_wait_takes_no_slot(tmp_path):
    path = tmp_path / "limiter.sqlite3"

    async def go():
        key = _key()
        limiter = Limiter(key=key, capacity=1, store=SqliteStore(path))
        held = await limiter.acquire()
        waiting = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await limiter.release(held)
        again = await asyncio.wait_for(limiter.acquire(), 1)
        await limiter.aclose()
        return again

    assert run(go())


def test_a_wait_cancelled_as_its_slot_is_handed_to_it_gives_the_slot_back():
    """The call holding the only slot ends and hands it to the waiting call, which is
    cancelled before it runs: the slot is not lost, the next call gets it."""

    async def go():
        limiter = Limiter(key=_key(), capacity=1, store=MemoryStore())
        held = await limiter.acquire()
        waiting = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0.05)
        await limiter.release(held)  # handed to the waiting call (not yet running)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        again = await asyncio.wait_for(limiter.acquire(), 1)
        await limiter.release(again)
        await limiter.aclose()
        return waiting.cancelled(), again

    cancelled, again = run(go())
    assert cancelled
    assert again


def test_a_redis_outage_falls_back_to_the_process_limit_with_a_warning(caplog):
    """Under ``per-process``, nothing listens on the store's port: acquire answers within the
    client's timeouts, from the process's own state (the limit still holds in the process),
    and says so (``pause``, the default: tests/evals/test_limiter_store_loss.py)."""

    async def go():
        key = _key()
        limiter = Limiter(
            key=key,
            capacity=2,
            store=RedisStore("redis://127.0.0.1:1/0"),
            on_store_loss="per-process",
        )
        started = time.monotonic()
        a = await limiter.acquire()
        b = await limiter.acquire()
        third = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0.1)
        blocked = not third.done()
        await limiter.release(a)
        await asyncio.wait_for(third, 2)
        elapsed = time.monotonic() - started
        await limiter.release(b)
        await limiter.aclose()
        return blocked, elapsed, key

    with caplog.at_level(logging.WARNING, logger="providers.limiter"):
        blocked, elapsed, key = run(go())
    assert blocked
    assert elapsed < 3
    assert key in PROCESS_STORE.states
    assert any("unreachable" in r.getMessage() for r in caplog.records)


def test_a_fake_sleep_moves_the_limiters_clock_instead_of_spinning(tmp_path):
    waits = []

    async def fake_sleep(seconds):
        waits.append(seconds)

    async def go():
        key = _key()
        limiter = Limiter(key=key, capacity=4, store=MemoryStore(), sleep=fake_sleep)
        token = await limiter.acquire()
        await limiter.release(token, Outcome(limited=True, retry_after_s=30.0))
        await limiter.sleep(10)  # the call's own backoff, on the fake clock: 20 s of pause left
        started = time.monotonic()
        await limiter.acquire()
        await limiter.aclose()
        return time.monotonic() - started, limiter.now() - time.time()

    elapsed, ahead = run(go())
    assert elapsed < 1
    assert waits == [10]  # the limiter's own wait is not handed to the caller's sleep
    assert ahead == pytest.approx(30.0, abs=0.1)


def test_it_reads_the_rate_limit_headers():
    headers = {
        "retry-after-ms": "250",
        "x-ratelimit-limit-requests": "6000",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "149000",
        "x-ratelimit-reset-tokens": "20ms",
    }
    outcome = outcome_read(headers, limited=True, retry_after_s=1.0)
    assert outcome.retry_after_s == 0.25  # retry-after-ms wins over Retry-After
    assert (outcome.rpm_limit, outcome.tpm_limit) == (6000, 150000)
    assert outcome.remaining_requests == 0 and outcome.reset_requests_s == 360
    assert outcome.reset_tokens_s == pytest.approx(0.02)
    assert outcome_read({}, limited=True, retry_after_s=1.0).retry_after_s == 1.0
    assert outcome_read({"x-ratelimit-limit-requests": "x"}, limited=False, retry_after_s=None) == (
        Outcome()
    )
    assert duration_seconds("1h2m3.5s") == 3723.5
    assert duration_seconds("1.5") == 1.5
    assert duration_seconds("soon") is None


def test_the_endpoint_key_is_the_url_and_model_unless_named():
    assert endpoint_key("https://api.example.com/v1/", "m") == "https://api.example.com/v1|m"
    assert endpoint_key("https://api.example.com/v1", "m", "team-account") == "team-account"
