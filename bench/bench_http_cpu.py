"""Benchmark: the HTTP client's share of a worker's CPU per trial.

No database: ``--calls`` chat completions (default 3,000) against the shared mock at
``--latency-ms`` (200), ``-c`` in flight (64), measured three ways in this process, in
alternation, ``--repeat`` times:

- ``runner``: the runner's call pool (``evals.runner.calls.CallPool``) with the OpenAI
  target: prompt rendering, the shared limiter (its SQLite file store here: no Redis), the
  request through the target's client (``providers.transport.JsonPoster``,
  aiohttp), retries' bookkeeping, the JSON reply parsed and made storable. CPU of the pool's
  loop thread per call;
- ``poster``: the target's client alone, one ``JsonPoster`` of ``c`` connections: POST and
  the reply's text (body encoded, text decoded as the target does), ``json.loads``;
- ``httpx``: bare httpx ``AsyncClient``s, sharded as the target sharded them before it moved
  to aiohttp (8 connections each), POST and ``json.loads`` of the reply, nothing else;
- ``aiohttp``: one bare aiohttp ``ClientSession`` (``TCPConnector(limit=c)``), the same.

Reported: CPU ms per call (``time.thread_time`` of the thread that runs the loop), and the
wall seconds. ``poster`` minus ``aiohttp`` is what the target's client adds to aiohttp;
``runner`` minus ``poster`` is the rest of the call thread's work per trial.

Usage: .venv/bin/python bench/bench_http_cpu.py [--calls 3000] [-c 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time

from _cluster import DEFAULT_MOCK, Mock, environment, load_average


def body(i: int) -> dict:
    return {
        "model": "mock-model",
        "messages": [
            {"role": "user", "content": f"Answer. [case=c{i:05d} p=0.5 expect=ANSWER-c{i:05d}]"}
        ],
    }


def runner_cpu(mock: Mock, calls: int, concurrency: int) -> tuple[float, float]:
    from evals.runner import calls as call_pool
    from evals.runner.targets import CaseInput

    spent = [0.0]
    original = call_pool.CallPool._run

    def timed(self) -> None:
        started = time.thread_time()
        try:
            original(self)
        finally:
            spent[0] += time.thread_time() - started

    config = {
        "kind": "openai",
        "base_url": mock.base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        "timeout_s": 30.0,
        "concurrency": concurrency,
    }
    cases = [
        (i, CaseInput(key=f"c{i:05d}", input=body(i)["messages"][0]["content"]))
        for i in range(calls)
    ]
    call_pool.CallPool._run = timed
    try:
        t0 = time.perf_counter()
        with call_pool.CallPool(config) as pool:
            pool.submit(cases)
            got = 0
            while got < calls:
                got += len(pool.results(timeout=5))
        wall = time.perf_counter() - t0
    finally:
        call_pool.CallPool._run = original
    return 1000 * spent[0] / calls, wall


async def _httpx(mock: Mock, calls: int, concurrency: int) -> None:
    import httpx

    per = 8
    clients = [
        httpx.AsyncClient(limits=httpx.Limits(max_connections=per, max_keepalive_connections=per))
        for _ in range(math.ceil(concurrency / per))
    ]
    url = httpx.URL(f"{mock.base_url}/chat/completions")
    load = [0] * len(clients)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with semaphore:
            k = min(range(len(clients)), key=load.__getitem__)
            load[k] += 1
            try:
                response = await clients[k].post(url, json=body(i))
                json.loads(response.text)
            finally:
                load[k] -= 1

    await asyncio.gather(*(one(i) for i in range(calls)))
    for client in clients:
        await client.aclose()


async def _poster(mock: Mock, calls: int, concurrency: int) -> None:
    from providers.transport import JsonPoster

    semaphore = asyncio.Semaphore(concurrency)
    poster = JsonPoster(
        f"{mock.base_url}/chat/completions",
        headers={"Content-Type": "application/json"},
        timeout_s=30.0,
        max_connections=concurrency,
    )

    async def one(i: int) -> None:
        async with semaphore:
            json.loads((await poster.post(body(i))).text)

    try:
        await asyncio.gather(*(one(i) for i in range(calls)))
    finally:
        await poster.aclose()


async def _aiohttp(mock: Mock, calls: int, concurrency: int) -> None:
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    url = f"{mock.base_url}/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:

        async def one(i: int) -> None:
            async with semaphore, s.post(url, json=body(i)) as response:
                json.loads(await response.text())

        await asyncio.gather(*(one(i) for i in range(calls)))


def bare_cpu(kind: str, mock: Mock, calls: int, concurrency: int) -> tuple[float, float]:
    run = {"httpx": _httpx, "aiohttp": _aiohttp, "poster": _poster}[kind]
    c0, t0 = time.thread_time(), time.perf_counter()
    asyncio.run(run(mock, calls, concurrency))
    return 1000 * (time.thread_time() - c0) / calls, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    args = parser.parse_args()
    environment(None, "")
    import django

    django.setup()
    mock = Mock(args.mock, latency_ms=args.latency_ms)
    rows: dict[str, list[tuple[float, float]]] = {
        "runner": [],
        "poster": [],
        "httpx": [],
        "aiohttp": [],
    }
    try:
        for _ in range(args.repeat):
            for kind in rows:
                if kind == "runner":
                    rows[kind].append(runner_cpu(mock, args.calls, args.concurrency))
                else:
                    rows[kind].append(bare_cpu(kind, mock, args.calls, args.concurrency))
    finally:
        mock.stop()
    for kind, values in rows.items():
        cpu = [v[0] for v in values]
        wall = [v[1] for v in values]
        print(
            f"{kind:8} CPU ms/call median {statistics.median(cpu):.3f} "
            f"({', '.join(f'{v:.3f}' for v in cpu)}); wall median {statistics.median(wall):.2f} s"
        )
    print(f"load {load_average()}")


if __name__ == "__main__":
    main()
