"""The Redis limiter store asked by many callers of one process at once (a worker running a
chunk at ``concurrency`` 256 and its judges): more commands at once than redis-py's default
pool of 100 connections; every one is answered, none falls back to the per-process store
(which would let workers together exceed the endpoint's limit)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from providers.limiter.rules import Ask
from providers.limiter.stores import RedisStore

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = pytest.mark.skipif(not REDIS_URL, reason="REDIS_URL not set")


def test_300_exchanges_at_once_are_all_answered():
    async def go():
        store = RedisStore(REDIS_URL)
        key, now, ask = f"test-{uuid.uuid4().hex}", time.time(), Ask(capacity=1000)
        try:
            taken = await asyncio.gather(
                *(store.exchange(key, f"h{i}", now, ask, keep=0, want=1) for i in range(300))
            )
            given_back = await asyncio.gather(
                *(store.exchange(key, f"h{i}", now, ask, keep=0) for i in range(300))
            )
            again = await store.exchange(key, "late", now, Ask(capacity=300), keep=0, want=300)
        finally:
            await store.aclose()
        return taken, given_back, again

    taken, given_back, again = asyncio.run(go())  # StoreDown (MaxConnectionsError) before
    assert [grant.granted for grant in taken] == [1] * 300
    assert [grant.held for grant in given_back] == [0] * 300
    assert again.granted == 300  # every slot came back
