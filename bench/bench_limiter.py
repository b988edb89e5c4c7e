"""Benchmark: the shared limiter's own cost per HTTP attempt.

In-process, no HTTP and no database: ``--workers`` limiters of one endpoint (as many workers'
targets; one event loop, each its own store client) each run ``--tasks`` coroutines that
take a slot, hold it for a simulated call of ``--call-ms`` (uniform 0.5–1.5 ×), give it back
with an empty ``Outcome`` (a 200 without rate-limit headers), and go again, ``--attempts``
attempts in all. Endpoint ``concurrency`` is ``--capacity``; scenarios: ``free`` (no rpm) and
``rpm`` (a declared rpm far above the rate reached, so every attempt is paced by the bucket
but never waits for it).

Per store (Redis on ``--redis``, the SQLite file, the in-process store) and scenario:
store round trips per attempt (calls into the store: Redis scripts, SQLite transactions),
CPU ms per attempt (``time.process_time`` of this process, minus a run with the same
coroutines and no limiter; Redis's own CPU not counted), wall seconds, the highest number of
attempts in flight over all limiters (must not pass ``--capacity``), and each limiter's
share of the attempts.

Usage: .venv/bin/python bench/bench_limiter.py [--redis redis://127.0.0.1:6379/3]
       [--attempts 20000] [--capacity 64] [--workers 2] [--tasks 64] [--call-ms 2] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

from _cluster import environment, load_average


class Counted:
    """A store that counts the calls made into it (one store round trip each: ``exchange``;
    ``acquire``, ``release`` and ``renew`` on the limiter before it)."""

    def __init__(self, store, counter: list[int]) -> None:
        self._store, self._counter = store, counter

    def __getattr__(self, name: str):
        method = getattr(self._store, name)
        if name == "aclose":
            return method

        async def counted(*args, **kwargs):
            self._counter[0] += 1
            return await method(*args, **kwargs)

        return counted


async def play(args, make_store, rpm: float | None, with_limiter: bool) -> dict:
    from providers.limiter import Limiter, Outcome

    key = f"bench-{uuid.uuid4().hex}"
    rng = random.Random(7)
    trips = [0]
    limiters = [
        Limiter(
            key=key,
            capacity=args.capacity,
            rpm=rpm,
            store=Counted(make_store(), trips),
        )
        for _ in range(args.workers)
    ]
    remaining = [args.attempts]
    in_flight, peak = [0], [0]
    done = [0] * args.workers

    async def task(w: int) -> None:
        limiter = limiters[w]
        while remaining[0] > 0:
            remaining[0] -= 1
            slot = await limiter.acquire() if with_limiter else None
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            await asyncio.sleep(args.call_ms / 1000 * rng.uniform(0.5, 1.5))
            in_flight[0] -= 1
            if with_limiter:
                await limiter.release(slot, Outcome())
            done[w] += 1

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(task(w) for w in range(args.workers) for _ in range(args.tasks)))
    for limiter in limiters:
        await limiter.aclose()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "trips": trips[0],
        "peak": peak[0],
        "shares": [round(d / max(1, sum(done)), 3) for d in done],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/3")
    parser.add_argument("--attempts", type=int, default=20000)
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--call-ms", type=float, default=2.0)
    parser.add_argument("--stores", default="redis,sqlite,memory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    environment(None, args.redis, {})
    import django

    django.setup()

    from providers.limiter.stores import MemoryStore, RedisStore, SqliteStore

    folder = Path(tempfile.mkdtemp(prefix="assay-bench-limiter-"))
    makers = {
        "redis": lambda: RedisStore(args.redis),
        "sqlite": lambda: SqliteStore(folder / "limiter.sqlite3"),
        "memory": MemoryStore,
    }
    shared_memory = MemoryStore()  # one in-process store shared by the "workers"
    makers["memory"] = lambda: shared_memory
    baseline = asyncio.run(play(args, MemoryStore, None, with_limiter=False))
    rows = []
    for name in args.stores.split(","):
        for scenario, rpm in (("free", None), ("rpm", 1e9)):
            seen = asyncio.run(play(args, makers[name], rpm, with_limiter=True))
            row = {
                "store": name,
                "scenario": scenario,
                "attempts": args.attempts,
                "capacity": args.capacity,
                "workers": args.workers,
                "round_trips_per_attempt": round(seen["trips"] / args.attempts, 3),
                "cpu_ms_per_attempt": round(
                    (seen["cpu_s"] - baseline["cpu_s"]) / args.attempts * 1000, 4
                ),
                "cpu_s": round(seen["cpu_s"], 2),
                "baseline_cpu_s": round(baseline["cpu_s"], 2),
                "wall_s": round(seen["wall_s"], 2),
                "max_in_flight": seen["peak"],
                "shares": seen["shares"],
                "load": load_average(),
            }
            rows.append(row)
            if not args.json:
                print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
