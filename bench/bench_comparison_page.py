"""Benchmark the comparison page (``evals:comparison``): server time and query count by size.

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_comparison_page.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_cmp \
        .venv/bin/python bench/bench_comparison_page.py

Builds, per size (200 and 2,000 cases), a base and a head run of 5 trials per case with one
gating grader (bulk_create; ~2% pipeline errors, ~1% errored grades, ~3% unknown costs, 10
tags; the head's per-case pass probabilities are the base's shifted by a small random
change), then fetches the page through Django's test client as a signed-in lead: median
and min of 7 requests after one warm-up (request to response, template rendered), the
median CPU of this process and the PostgreSQL backend's CPU per request (``_server_cpu``;
on SQLite the database's work is this process's CPU), and the query count
(CaptureQueriesContext), with the cache cleared before each request (first view of a pair
of runs) and with the comparison cached (``evals.comparison.cache``). The first view is
measured twice: with both runs' summaries stored (``evals.comparison.summary``, as
``run_finalize`` stores them when a run closes: what a user meets), and with them deleted
before each request too (a run finished before summaries existed, or changed since: the
summaries are computed and stored within the request).
Target: first view < 250 ms at 2,000 cases x 5 trials a side, with a query
count that does not grow with the run.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from _data import analyze, run_build, suite_build  # noqa: E402
from _server_cpu import db_cpu_ms  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from evals.comparison.summary import run_summary_refresh  # noqa: E402
from evals.models import Run, RunSummary, Suite  # noqa: E402

TRIALS = 5
GRADERS = [{"key": "policy", "kind": "python"}]


def build(n_cases: int, rng: random.Random) -> tuple[Run, Run]:
    suite, cases = suite_build(n_cases, name=f"bench-{n_cases}", kind=Suite.Kind.REGRESSION)
    base_p = [rng.choice([1.0, 1.0, 0.9, 0.7, 0.4]) for _ in cases]
    head_p = [min(1.0, max(0.0, p + rng.choice([0.0, 0.0, -0.1, 0.1, -0.3]))) for p in base_p]
    runs = []
    for name, probs in (("base", base_p), ("head", head_p)):
        runs.append(
            run_build(
                suite,
                cases,
                name=name,
                probs=probs,
                graders=GRADERS,
                trials=TRIALS,
                rng=rng,
                output=lambda case, rng: f"answer {rng.randint(0, 9)} for {case.key} " * 40,
            )
        )
    return runs[0], runs[1]


def measure(
    client: Client, url: str, *, cold: bool, no_summary: bool = False, repeats: int = 7
) -> dict:
    """GET ``url``: median and min wall ms, median CPU ms of this process, the database
    backend's CPU ms per request (PostgreSQL; None on SQLite, whose work is in this
    process), the query count and the response bytes; ``cold`` clears Django's cache
    before each request (comparison and detectable-drop caches: the first view of a pair
    of runs), else the comparison comes from the cache (every later view: filtering,
    sorting, paging); ``no_summary`` also deletes the stored run summaries."""
    response = client.get(url)  # warm-up (imports, template loading)
    assert response.status_code == 200, response.status_code
    wall, cpu = [], []
    db_start = db_cpu_ms()
    for _ in range(repeats):
        if cold:
            cache.clear()
        if no_summary:
            RunSummary.objects.all().delete()
        start, start_cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    db_end = db_cpu_ms()
    if cold:
        cache.clear()
    if no_summary:
        RunSummary.objects.all().delete()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    return {
        "median": statistics.median(wall),
        "min": min(wall),
        "cpu": statistics.median(cpu),
        "db_cpu": None if db_start is None else (db_end - db_start) / repeats,
        "queries": len(ctx.captured_queries),
        "size": len(response.content),
    }


def main() -> None:
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261130)
        lead = User.objects.create_user("lead", password="x")
        lead.groups.add(Group.objects.get(name="lead"))
        client = Client()
        client.force_login(lead)
        print(f"database: {connection.vendor}")
        for n_cases in (200, 2000):
            base, head = build(n_cases, rng)
            analyze()
            for run in (base, head):
                run_summary_refresh(run=run)  # what run_finalize does as a run closes
            url = reverse("evals:comparison", args=[head.uuid, base.uuid])
            for label, suffix, cold, no_summary in (
                ("first view (cold cache, summaries stored)", "", True, False),
                ("first view (cold cache, no summary stored)", "", True, True),
                ("page (comparison cached)", "", False, False),
                ("filtered to broken (cached)", "?change=broken", False, False),
            ):
                m = measure(client, url + suffix, cold=cold, no_summary=no_summary, repeats=7)
                db = "" if m["db_cpu"] is None else f", database CPU {m['db_cpu']:.0f} ms"
                print(
                    f"{n_cases} cases x {TRIALS} trials, {label}: median {m['median']:.0f} ms "
                    f"(min {m['min']:.0f} ms), process CPU {m['cpu']:.0f} ms{db}, "
                    f"{m['queries']} queries, {m['size'] / 1024:.0f} KiB, "
                    f"load {os.getloadavg()[0]:.1f}"
                )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
