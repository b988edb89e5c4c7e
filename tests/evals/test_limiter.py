"""The shared limiter (evals.runner.limiter): its rules on every store (in-process, the
SQLite file, Redis when REDIS_URL is set), the Lua rules held to the Python ones, a dead
holder's slot coming back, the token buckets' rate, 429 pauses and the slow-down, the header
reading, and a store outage."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid

import pytest

from evals.runner.limiter import Limiter, endpoint_key
from evals.runner.limiter.headers import duration_seconds, outcome_read
from evals.runner.limiter.rules import FULL, RECOVER_S, SAFETY, Ask, Outcome
from evals.runner.limiter.stores import PROCESS_STORE, MemoryStore, RedisStore, SqliteStore

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


def _key() -> str:
    return f"test-{uuid.uuid4().hex}"


def run(coro):
    return asyncio.run(coro)


async def _closing(store, coro):
    try:
        return await coro
    finally:
        await store.aclose()


def test_no_more_than_capacity_slots_are_granted_and_a_release_frees_one(store):
    async def go():
        key, now = _key(), time.time()
        answers = [await store.acquire(key, f"t{i}", now, Ask(capacity=3)) for i in range(4)]
        await store.release(key, "t0", now, None)
        again = await store.acquire(key, "t4", now, Ask(capacity=3))
        return answers, again

    answers, again = run(_closing(store, go()))
    assert answers == [0.0, 0.0, 0.0, FULL]
    assert again == 0.0


def test_a_dead_holders_slot_comes_back_when_its_lease_expires(store):
    async def go():
        key, now = _key(), time.time()
        first = await store.acquire(key, "dead", now, Ask(capacity=1, lease_s=5))
        while_held = await store.acquire(key, "live", now + 4.9, Ask(capacity=1))
        after = await store.acquire(key, "live", now + 5.1, Ask(capacity=1))
        return first, while_held, after

    assert run(_closing(store, go())) == (0.0, FULL, 0.0)


def test_a_renewed_lease_does_not_expire(store):
    async def go():
        key, now = _key(), time.time()
        await store.acquire(key, "holder", now, Ask(capacity=1, lease_s=5))
        await store.renew(key, ["holder"], now + 4, 5)
        return await store.acquire(key, "other", now + 8, Ask(capacity=1))

    assert run(_closing(store, go())) == FULL


def test_the_request_bucket_keeps_the_rate_under_the_declared_rpm(store):
    """600 rpm: the bucket starts empty, then SAFETY x 10 requests a second; over 60 s of
    the store's clock, as many grants as 60 s of the rate."""

    async def go():
        key, start = _key(), time.time()
        now, granted = start, 0
        while now < start + 60:
            wait = await store.acquire(key, f"t{granted}", now, Ask(capacity=1000, rpm=600))
            if wait == 0:
                granted += 1
            else:
                assert wait > 0
                now += wait
        return granted

    granted = run(_closing(store, go()))
    expected = SAFETY * 10 * 60
    assert expected - 2 <= granted <= expected + 1


def test_a_worker_with_an_earlier_clock_does_not_refill_the_bucket_twice(store):
    """Workers' calls interleave: one asking with an earlier time than the last count must
    not move the count back (the refill since then would be counted twice)."""

    async def go():
        key, t = _key(), time.time()
        ask = Ask(capacity=1000, rpm=600)  # 9.8 a second, starting empty
        await store.acquire(key, "first", t, ask)
        granted = 0
        for i, at in enumerate([t + 1.0] * 12 + [t + 0.5] * 12 + [t + 1.0] * 12):
            granted += await store.acquire(key, f"t{i}", at, ask) == 0.0
        return granted

    assert run(_closing(store, go())) == 9  # one second of refill, once


def test_the_token_bucket_waits_for_a_calls_tokens_and_is_corrected_by_usage(store):
    async def go():
        key, now = _key(), time.time()
        ask = Ask(capacity=100, tpm=6000, tokens=60)  # 98 tokens a second, starts empty
        first = await store.acquire(key, "a", now, ask)  # wait for 60
        now += first
        granted = await store.acquire(key, "a", now, ask)
        now += 1.0  # full again: 98
        await store.acquire(key, "b", now, ask)
        second = await store.acquire(key, "c", now, ask)  # 38 left: wait for 22 more
        # "b" really used 10: 50 given back, "c" fits at once
        await store.release(key, "b", now, Outcome(tokens_delta=-50))
        third = await store.acquire(key, "c", now, ask)
        return first, granted, second, third

    first, granted, second, third = run(_closing(store, go()))
    assert first == pytest.approx(60 / (SAFETY * 100), rel=1e-3)
    assert granted == 0.0
    assert second == pytest.approx(22 / (SAFETY * 100), rel=1e-3)
    assert third == 0.0


def test_a_429_pauses_the_endpoint_for_retry_after_then_halves_and_recovers(store):
    async def go():
        key, now = _key(), time.time()
        for i in range(8):
            assert await store.acquire(key, f"t{i}", now, Ask(capacity=8)) == 0.0
        for i in range(8):
            await store.release(key, f"t{i}", now, Outcome(limited=True, retry_after_s=2.0))
        paused = await store.acquire(key, "p", now + 1, Ask(capacity=8))
        after = []
        for i in range(5):
            after.append(await store.acquire(key, f"a{i}", now + 2.01, Ask(capacity=8)))
        later = now + 2.01 + RECOVER_S / 2
        recovered = [await store.acquire(key, f"r{i}", later, Ask(capacity=8)) for i in range(4)]
        return paused, after, recovered

    paused, after, recovered = run(_closing(store, go()))
    assert paused == pytest.approx(1.0, abs=1e-3)
    # eight 429s at once halve once (DECREASE_SPACING_S): 4 slots of 8
    assert after == [0.0, 0.0, 0.0, 0.0, FULL]
    # RECOVER_S / 2 later the factor is back to 1: 8 slots, 4 held
    assert recovered == [0.0, 0.0, 0.0, 0.0]


def test_a_429_announcing_a_new_limit_teaches_it_instead_of_halving(store):
    async def go():
        key, now = _key(), time.time()
        await store.acquire(key, "t", now, Ask(capacity=4))
        await store.release(key, "t", now, Outcome(limited=True, retry_after_s=0.01, rpm_limit=600))
        # the request bucket is empty (the provider's is): one request every 1 / 9.8 s
        first = await store.acquire(key, "a", now + 0.02, Ask(capacity=4))
        granted = await store.acquire(key, "a", now + 1 / (SAFETY * 10), Ask(capacity=4))
        slots = [await store.acquire(key, f"s{i}", now + 5, Ask(capacity=4)) for i in range(4)]
        return first, granted, slots

    first, granted, slots = run(_closing(store, go()))
    assert first == pytest.approx((1 - 0.02 * SAFETY * 10) / (SAFETY * 10), rel=1e-3)
    assert granted == 0.0
    assert slots == [0.0, 0.0, 0.0, FULL]  # 4 slots: the factor was not halved


def test_no_remaining_requests_pauses_until_the_announced_reset(store):
    async def go():
        key, now = _key(), time.time()
        await store.acquire(key, "t", now, Ask(capacity=4))
        outcome = Outcome(remaining_requests=0, reset_requests_s=3.0)
        await store.release(key, "t", now, outcome)
        return await store.acquire(key, "u", now + 1, Ask(capacity=4))

    assert run(_closing(store, go())) == pytest.approx(2.0, abs=1e-3)


def test_the_lua_rules_answer_as_the_python_rules_do(tmp_path):
    """One random scenario of acquires, releases with every kind of outcome and time steps,
    played on the in-process store and on Redis: the same answers."""
    if not REDIS_URL:
        pytest.skip("REDIS_URL not set")
    rng = random.Random(11)
    key = _key()
    steps = []
    now = float(int(time.time()))  # whole seconds plus steps of milliseconds
    held: list[str] = []
    for i in range(400):
        now += rng.choice([0.0, 0.001, 0.05, 0.3, 2.5])
        if held and rng.random() < 0.45:
            token = held.pop(rng.randrange(len(held)))
            outcome = rng.choice(
                [
                    None,
                    Outcome(tokens_delta=rng.uniform(-30, 30)),
                    Outcome(limited=True, retry_after_s=rng.choice([None, 0.2, 1.0])),
                    Outcome(limited=True, retry_after_s=0.1, rpm_limit=rng.choice([600, 1200])),
                    Outcome(remaining_requests=0, reset_requests_s=0.4, tpm_limit=20000),
                ]
            )
            steps.append(("release", token, now, outcome))
        else:
            ask = Ask(
                capacity=rng.choice([3, 6]),
                rpm=rng.choice([None, 900]),
                tpm=rng.choice([None, 30000]),
                tokens=rng.uniform(0, 400),
                lease_s=rng.choice([1.0, 30.0]),
            )
            token = f"t{i}"
            steps.append(("acquire", token, now, ask))
            held.append(token)

    async def play(store):
        answers = []
        try:
            for op, token, at, arg in steps:
                if op == "acquire":
                    answers.append(await store.acquire(key, token, at, arg))
                else:
                    await store.release(key, token, at, arg)
        finally:
            await store.aclose()
        return answers

    python_answers = run(play(MemoryStore()))
    lua_answers = run(play(RedisStore(REDIS_URL)))
    assert len(python_answers) == len(lua_answers)
    assert sum(1 for a in python_answers if a == 0.0) > 20  # the scenario grants, waits, fills
    assert sum(1 for a in python_answers if a == FULL) > 5
    assert sum(1 for a in python_answers if a > 0) > 5
    assert lua_answers == pytest.approx(python_answers, abs=1e-4)


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


def test_a_redis_outage_falls_back_to_the_process_limit_with_a_warning(caplog):
    """Nothing listens on the store's port: acquire answers within the client's timeouts,
    from the process's own state (the limit still holds in the process), and says so."""

    async def go():
        key = _key()
        limiter = Limiter(key=key, capacity=2, store=RedisStore("redis://127.0.0.1:1/0"))
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

    with caplog.at_level(logging.WARNING, logger="evals.runner.limiter"):
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
