"""Benchmark: OpenAITarget (one aiohttp session of C connections) against the shared mock LLM,
no database.

Starts ../shared/tools/mockllm/server.py on a free port (--latency-ms 200 --jitter-ms 0,
seed 1234) and runs 200 cases × 5 trials through the target as built at concurrency 16 and
64 (the target once sharded httpx clients; bare httpx and aiohttp are compared in
bench_http_cpu.py). For each it reports:

- % of concurrency/latency: achieved calls/s ÷ (C / 0.200 s), with the span (first request
  to last response) and max in flight taken from the mock's /admin/stats;
- CPU seconds of this process per 1,000 calls (time.process_time);
- pass count (output == the marker's expect token) and the count the mock's own
  ``expected_outcome`` predicts offline for the same cases, which must be equal.

Cases: keys c00001..c00200, p spread evenly over [0.40, 0.90] (p_i = 0.40 + 0.50·i/199),
which the mock's README quotes as 653 of 1000 for seed 1234.

Usage: .venv/bin/python bench/bench_target_client.py [--mock PATH] [--json] [--port N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.runner.targets import CaseInput  # noqa: E402
from evals.runner.targets import openai as openai_target  # noqa: E402

DEFAULT_MOCK = ROOT.parent / "shared" / "tools" / "mockllm" / "server.py"
LATENCY_S = 0.200
CASES, TRIALS, SEED = 200, 5, 1234


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cases() -> list[CaseInput]:
    out = []
    for i in range(CASES):
        key = f"c{i + 1:05d}"
        p = 0.40 + 0.50 * i / (CASES - 1)
        marker = f"[case={key} p={p!r} expect=ANSWER-{key}]"
        for attempt in range(1, TRIALS + 1):
            out.append(
                CaseInput(
                    key=key,
                    input=f"Answer the question. {marker}",
                    expected=f"ANSWER-{key}",
                    attempt=attempt,
                )
            )
    return out


def predicted_passes(mock_path: Path) -> int:
    sys.path.insert(0, str(mock_path.parent))
    from server import MARKER_RE, expected_outcome  # the mock's own policy

    total = 0
    for case in cases():
        match = MARKER_RE.search(case.input)
        total += expected_outcome(SEED, case.key, case.attempt - 1, float(match.group(2)))
    return total


async def measure(base_url: str, concurrency: int) -> dict:
    config = {
        "kind": "openai",
        "base_url": base_url + "/v1",
        "model": "mock-model",
        "prompt_template": "$input",
        "concurrency": concurrency,
        "timeout_s": 30,
    }
    target = openai_target.OpenAITarget.from_config(config)
    async with httpx.AsyncClient(base_url=base_url) as admin:
        await admin.post("/admin/reset")
        todo = cases()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(target.call(case) for case in todo))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stats = (await admin.get("/admin/stats")).json()
    await target.aclose()
    calls = len(todo)
    span = stats["span_s"]
    return {
        "client": f"OpenAITarget, 1 aiohttp session × ≤{target.http.max_connections} conn",
        "concurrency": concurrency,
        "calls": calls,
        "errors": sum(not r.ok for r in results),
        "passes": sum(r.ok and r.output == c.expected for r, c in zip(results, todo, strict=True)),
        "wall_s": round(wall, 2),
        "span_s": round(span, 2),
        "max_in_flight": stats["max_inflight"],
        "pct_of_ideal": round(100 * (calls / span) / (concurrency / LATENCY_S), 1),
        "cpu_s_per_1000": round(cpu * 1000 / calls, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mock", type=Path, default=DEFAULT_MOCK)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--port", type=int, default=None, help="the mock's port (default: free)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from _cluster import environment

    environment(None, "")  # settings (and the limiter's SQLite file) of the embedded default
    import django

    django.setup()
    port = args.port or free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(args.mock),
            "--port",
            str(port),
            "--latency-ms",
            "200",
            "--jitter-ms",
            "0",
            "--seed",
            str(SEED),
        ],
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(base_url + "/health", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        predicted = predicted_passes(args.mock)
        rows = []
        for concurrency in (16, 64):
            row = asyncio.run(measure(base_url, concurrency))
            row["predicted_passes"] = predicted
            rows.append(row)
            print(json.dumps(row) if args.json else row, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    if not args.json:
        print(
            "\n| client | C | % of C/latency | max in flight | CPU s / 1,000 calls "
            "| passes (predicted) | errors |"
        )
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['client']} | {r['concurrency']} | {r['pct_of_ideal']}% | "
                f"{r['max_in_flight']} | {r['cpu_s_per_1000']} | {r['passes']} "
                f"({r['predicted_passes']}) | {r['errors']} |"
            )


if __name__ == "__main__":
    main()
