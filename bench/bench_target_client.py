"""Benchmark: a model target (one aiohttp session of C connections) against the shared mock
LLM, no database, on each provider's protocol: OpenAI chat completions (``openai``) or
Anthropic's Messages API (``anthropic``, ``/v1/messages``).

Starts ../shared/tools/mockllm/server.py on a free port (--latency-ms 200 --jitter-ms 0,
seed 1234) and runs N cases × 5 trials (``--cases``, 200 by default) through the target as
built at each concurrency of ``--concurrency`` (16 and 64 by default; the target once sharded
httpx clients; bare httpx and aiohttp are compared in bench_http_cpu.py), for each provider
of ``--provider`` (``openai`` by default; ``openai,anthropic`` both). For each it reports:

- % of concurrency/latency: achieved calls/s ÷ (C / 0.200 s), with the span (first request
  to last response) and max in flight taken from the mock's /admin/stats;
- CPU seconds of this process per 1,000 calls (time.process_time): everything, the event
  loop, aiohttp and the limiter included;
- the adapter's CPU per call apart (``adapter_cpu_ms``): the protocol's own work, building the
  request body (``OpenAITarget.request_body``) and reading the answer
  (``EndpointClient.answer_read``: JSON parse, the reply, its kind), timed around each with
  ``time.thread_time`` during the run; and the same two on one recorded answer in a loop of
  20,000 (``adapter_loop_ms``), which the machine's other load disturbs less;
- pass count (output == the marker's expect token) and the count the mock's own
  ``expected_outcome`` predicts offline for the same cases, which must be equal.

Cases: keys c00001..cN, p spread evenly over [0.40, 0.90] (p_i = 0.40 + 0.50·i/(N−1)),
which the mock's README quotes as 653 of 1000 for 200 cases and seed 1234.

Usage: .venv/bin/python bench/bench_target_client.py [--mock PATH] [--json] [--port N]
       [--provider openai,anthropic] [--cases 2000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


# What a target adds to speak each provider (as bench/_cluster.py's PROVIDER_TARGETS).
PROVIDER_TARGETS: dict[str, dict] = {
    "openai": {},
    "anthropic": {"provider": "anthropic", "api_key_env": None, "settings": {"max_tokens": 64}},
}
ADAPTER_LOOP = 20_000


def cases(n_cases: int = CASES) -> list[CaseInput]:
    out = []
    for i in range(n_cases):
        key = f"c{i + 1:05d}"
        p = 0.40 + 0.50 * i / (n_cases - 1)
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


def predicted_passes(mock_path: Path, n_cases: int = CASES) -> int:
    sys.path.insert(0, str(mock_path.parent))
    from server import MARKER_RE, expected_outcome  # the mock's own policy

    total = 0
    for case in cases(n_cases):
        match = MARKER_RE.search(case.input)
        total += expected_outcome(SEED, case.key, case.attempt - 1, float(match.group(2)))
    return total


class AdapterClock:
    """Thread CPU seconds spent inside the wrapped functions (the event loop's thread: the
    body is built and the answer read there, synchronously), and the last answer read."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.answer = None

    def wrap(self, function):
        def timed(*args):
            t0 = time.thread_time()
            try:
                return function(*args)
            finally:
                self.cpu_s += time.thread_time() - t0

        return timed

    def keep(self, function):
        def kept(response, body):
            self.answer = (response, body)
            return function(response, body)

        return kept


def adapter_loop_ms(target, case: CaseInput, answer) -> float:
    """CPU ms of one body build plus one answer read, over ``ADAPTER_LOOP`` rounds on
    ``answer`` (an ``HttpAnswer`` and its body recorded in the run)."""
    response, body = answer
    read = target.client.answer_read
    t0 = time.thread_time()
    for _ in range(ADAPTER_LOOP):
        target.request_body(case)
        read(response, body)
    return (time.thread_time() - t0) * 1000 / ADAPTER_LOOP


async def measure(base_url: str, concurrency: int, provider: str, n_cases: int) -> dict:
    config = {
        "kind": "openai",
        "base_url": base_url + "/v1",
        "model": "mock-model",
        "prompt_template": "$input",
        "concurrency": concurrency,
        "timeout_s": 30,
        **PROVIDER_TARGETS[provider],
    }
    target = openai_target.OpenAITarget.from_config(config)
    clock = AdapterClock()
    request_body = target.request_body
    answer_read = target.client.answer_read
    target.request_body = clock.wrap(request_body)  # type: ignore[method-assign]
    target.client.answer_read = clock.wrap(clock.keep(answer_read))  # type: ignore[method-assign]
    async with httpx.AsyncClient(base_url=base_url) as admin:
        await admin.post("/admin/reset")
        todo = cases(n_cases)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(target.call(case) for case in todo))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stats = (await admin.get("/admin/stats")).json()
    target.request_body = request_body  # type: ignore[method-assign]
    target.client.answer_read = answer_read  # type: ignore[method-assign]
    loop_ms = adapter_loop_ms(target, todo[0], clock.answer)
    await target.aclose()
    calls = len(todo)
    span = stats["span_s"]
    on_api = stats["by_api"][provider]["requests"]
    assert on_api == stats["requests"], (provider, on_api, stats["requests"])
    return {
        "client": f"OpenAITarget, 1 aiohttp session × ≤{target.http.max_connections} conn",
        "provider": provider,
        "concurrency": concurrency,
        "calls": calls,
        "errors": sum(not r.ok for r in results),
        "passes": sum(r.ok and r.output == c.expected for r, c in zip(results, todo, strict=True)),
        "wall_s": round(wall, 2),
        "span_s": round(span, 2),
        "max_in_flight": stats["max_inflight"],
        "pct_of_ideal": round(100 * (calls / span) / (concurrency / LATENCY_S), 1),
        "cpu_s_per_1000": round(cpu * 1000 / calls, 2),
        "adapter_cpu_ms": round(clock.cpu_s * 1000 / calls, 4),
        "adapter_loop_ms": round(loop_ms, 4),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mock", type=Path, default=DEFAULT_MOCK)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--port", type=int, default=None, help="the mock's port (default: free)")
    parser.add_argument("--provider", default="openai", help="openai, anthropic, or both: comma")
    parser.add_argument("--cases", type=int, default=CASES)
    parser.add_argument("--concurrency", default="16,64", help="comma-separated")
    args = parser.parse_args()
    providers = args.provider.split(",")
    if set(providers) - set(PROVIDER_TARGETS):
        parser.error(f"--provider: one of {', '.join(PROVIDER_TARGETS)}")
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
        predicted = predicted_passes(args.mock, args.cases)
        rows = []
        for provider in providers:
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                row = asyncio.run(measure(base_url, concurrency, provider, args.cases))
                row["predicted_passes"] = predicted
                rows.append(row)
                print(json.dumps(row) if args.json else row, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    if not args.json:
        print(
            "\n| provider | client | C | % of C/latency | max in flight | CPU s / 1,000 calls "
            "| adapter CPU-ms / call (loop) | passes (predicted) | errors | load |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['provider']} | {r['client']} | {r['concurrency']} | {r['pct_of_ideal']}% | "
                f"{r['max_in_flight']} | {r['cpu_s_per_1000']} | {r['adapter_cpu_ms']} "
                f"({r['adapter_loop_ms']}) | {r['passes']} ({r['predicted_passes']}) | "
                f"{r['errors']} | {r['load']} |"
            )


if __name__ == "__main__":
    main()
