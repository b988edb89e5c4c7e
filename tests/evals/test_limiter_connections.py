"""The Redis limiter store under a chunk's full concurrency: one worker's call loop asks
and gives back hundreds of slots at once (a target with ``concurrency`` 256), more than
redis-py's default pool of 100 connections; every one is answered, none falls back to the
per-process store (which would let workers together exceed the endpoint's limit)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from evals.runner.limiter.rules import Ask
from evals.runner.limiter.stores import RedisStore

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = pytest.mark.skipif(not REDIS_URL, reason="REDIS_URL not set")


def test_300_slots_asked_and_given_back_at_once_are_all_answered():
    async def go():
        store = RedisStore(REDIS_URL)
        key, now = f"test-{uuid.uuid4().hex}", time.time()
        try:
            waits = await asyncio.gather(
                *(store.acquire(key, f"t{i}", now, Ask(capacity=1000)) for i in range(300))
            )
            await asyncio.gather(*(store.release(key, f"t{i}", now, None) for i in range(300)))
            again = await asyncio.gather(
                *(store.acquire(key, f"u{i}", now, Ask(capacity=300)) for i in range(301))
            )
        finally:
            await store.aclose()
        return waits, again

    waits, again = asyncio.run(go())  # raised StoreDown (MaxConnectionsError) before
    assert waits == [0.0] * 300
    assert sorted(again).count(0.0) == 300  # every slot came back; the 301st waits
