"""Benchmark paging trials through the API (``GET /api/trials/?run=&page_size=100``) with 50
concurrent clients against a real server (``bench/_server.py``: gunicorn as in the README's
Production section).

Usage (SQLite, a throwaway file under /tmp):
    .venv/bin/python bench/bench_api_paging.py
PostgreSQL (the database is dropped and re-created):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_paging \
        .venv/bin/python bench/bench_api_paging.py

1. Migrates a fresh database; builds a run of 2,000 cases x 5 trials (``bench/_data.py``,
   outputs of ~300 characters, 2 graders) and a lead's API token.
2. Query count per page (Django's test client in this process, CaptureQueriesContext): the
   first and the 10th page of that run and of a run of 200 x 5, which must not differ; and
   the median CPU time of those 20 requests in this process (a figure the machine's load
   moves less than the throughput).
3. Starts the server; ``BENCH_CLIENTS`` (50) threads, one ``http.client`` connection each,
   page through the run with ``page_size=100`` following ``next`` (back to the first page
   after the last) for ``BENCH_SECONDS`` (20); every page is parsed and must hold 100 trials.
Prints pages/s (= 100-trial pages completed / wall), the CPU per page of the server (its
processes, from /proc) and of the load generator, server time (``Server-Timing``) p50 /
p95 and round trip p50 / p95 (the machine's load average beside: both share its cores).
Target: at least 150 pages/s with 50 clients.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _server import (
    bench_env,
    database_fresh,
    server_cpu_seconds,
    server_label,
    server_start,
    server_stop,
)

CLIENTS = int(os.environ.get("BENCH_CLIENTS", "50"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "20"))
PORT = int(os.environ.get("BENCH_PORT", "8766"))
PAGE = 100
GRADERS = [{"key": "schema", "kind": "json_schema"}, {"key": "policy", "kind": "python"}]


def setup_data() -> tuple[str, str, dict[int, tuple[int, int]]]:
    """(token, uuid of the 2,000-case run, cases -> (queries on page 1, on page 10))."""
    database_fresh()
    from _data import analyze, run_build, suite_build
    from django.contrib.auth.models import Group, User
    from django.db import connection, connections
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from apitokens.tokens import token_create

    lead = User.objects.create_user("lead", password="bench-password-123")
    lead.groups.add(Group.objects.get(name="lead"))
    _, token = token_create(user=lead, name="bench")
    rng = random.Random(20261202)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", SERVER_NAME="127.0.0.1")
    queries, run_uuid, cpu = {}, "", []
    for n_cases in (200, 2000):
        suite, cases = suite_build(n_cases, name=f"paging-{n_cases}")
        run = run_build(
            suite,
            cases,
            name="bench",
            probs=[rng.random() for _ in cases],
            graders=GRADERS,
            trials=5,
            rng=rng,
            output=lambda case, rng: f"The answer to {case.key} is {rng.randint(0, 9)}. " * 12,
        )
        analyze()
        url = f"/api/trials/?run={run.uuid}&page_size={PAGE}"
        counts = []
        client.get(url)  # warm-up
        for page in range(1, 11):
            with CaptureQueriesContext(connection) as ctx:
                cpu0 = time.process_time()
                response = client.get(url)
                cpu.append((time.process_time() - cpu0) * 1000)
            assert response.status_code == 200, (response.status_code, response.headers)
            body = response.json()
            assert len(body["results"]) == PAGE
            if page in (1, 10):
                counts.append(len(ctx.captured_queries))
            url = body["next"]
        queries[n_cases] = tuple(counts)
        run_uuid = str(run.uuid)
    connections.close_all()
    print(
        f"in-process CPU per page (Django's test client, queries captured): median "
        f"{statistics.median(cpu):.1f} ms of {len(cpu)} pages"
    )
    return token, run_uuid, queries


def client_loop(
    token: str, run_uuid: str, stop: float, pages: list, server: list, rtt: list, errors: list
) -> None:
    first = f"/api/trials/?run={run_uuid}&page_size={PAGE}"
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    path = first
    while time.perf_counter() < stop:
        t0 = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            errors.append(repr(exc))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
            continue
        rtt.append((time.perf_counter() - t0) * 1000)
        if response.will_close:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
        timing = response.getheader("Server-Timing", "")
        if timing.startswith("app;dur="):
            server.append(float(timing.removeprefix("app;dur=")))
        if response.status != 200:
            errors.append(f"{response.status} {body[:200]!r}")
            path = first
            continue
        data = json.loads(body)
        nxt = data["next"]
        if len(data["results"]) == PAGE:
            pages.append(1)
        elif nxt is not None:
            errors.append(f"a page of {len(data['results'])} before the end")
        if nxt is None:
            path = first
        else:
            parts = urlsplit(nxt)
            path = f"{parts.path}?{parts.query}"
    conn.close()


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    env = bench_env("assay-bench-paging.sqlite3")
    os.environ.update(env)
    token, run_uuid, queries = setup_data()
    for n_cases, (q1, q20) in queries.items():
        print(f"{n_cases} cases x 5 trials: {q1} queries on page 1, {q20} on page 10")
    child = server_start(PORT, env)
    try:
        pages: list[int] = []
        server: list[float] = []
        rtt: list[float] = []
        errors: list[str] = []
        cpu0, client_cpu0 = server_cpu_seconds(child), time.process_time()
        t0 = time.perf_counter()
        stop = t0 + SECONDS
        threads = [
            threading.Thread(
                target=client_loop, args=(token, run_uuid, stop, pages, server, rtt, errors)
            )
            for _ in range(CLIENTS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        server_cpu = server_cpu_seconds(child) - cpu0
        client_cpu = time.process_time() - client_cpu0
    finally:
        server_stop(child)
    db = os.environ["DATABASE_URL"].split(":", 1)[0]
    print(
        f"database: {db}; {server_label()}; {CLIENTS} clients for {wall:.1f} s: "
        f"{len(pages)} pages of {PAGE} trials, {len(pages) / wall:.1f} pages/s; "
        f"errors: {len(errors)} {errors[:3]}"
    )
    n = max(len(pages), 1)
    print(
        f"CPU per page: server {server_cpu / n * 1000:.1f} ms, load generator "
        f"{client_cpu / n * 1000:.1f} ms"
    )
    if server:
        print(f"server time ms: p50 {pct(server, 50):.1f}, p95 {pct(server, 95):.1f}")
        print(f"round trip ms:  p50 {pct(rtt, 50):.1f}, p95 {pct(rtt, 95):.1f}")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
