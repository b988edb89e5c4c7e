"""Benchmark the experiment page (``evals:experiment-detail``): server time and query count by
size.

Usage (SQLite, in a throwaway test database; sizes and ``--profile`` optional):
    .venv/bin/python bench/bench_experiment_page.py [200 2000] [--profile]
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_exp \
        .venv/bin/python bench/bench_experiment_page.py

Builds, per size (200 and 2,000 cases), an experiment of 10 finished variants of 5 trials
per case with one gating grader (``_data.run_build``: bulk_create; ~2% pipeline errors, ~1%
errored grades, ~3% unknown costs), variant v's per-case pass probabilities the same base
profile shifted by v's own offset, then fetches the page through Django's test client as a
signed-in lead: median and min of 5 requests after one warm-up (request to response,
template rendered), with the decision read from the cache (stored as the last variant
closed: ``run_finalize`` stores each run's summary and warms the decision, done here by
hand: what a user meets) and with the cache cleared before each request (computed within
the request), process
CPU, the PostgreSQL backend's CPU per request (``_server_cpu``), the query count and the
response size; then the case view of the first case; and ``experiment_decision`` alone
(process CPU), the part of the first view that is the decision's. Target: first view < 500 ms at
10 variants × 2,000 cases × 5 trials, a query count that does not grow with the suite.
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
from django.core.cache import cache, caches  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from evals.comparison.summary import run_summary_refresh  # noqa: E402
from evals.experiments.decision import (  # noqa: E402
    _decision_compute,
    experiment_decision_warm,
    experiment_variants,
)
from evals.models import Experiment, ExperimentVariant  # noqa: E402

VARIANTS = 10
TRIALS = 5
GRADERS = [{"key": "policy", "kind": "python"}]


def build(n_cases: int, rng: random.Random) -> Experiment:
    """An experiment of ``VARIANTS`` finished runs over a new suite of ``n_cases`` cases."""
    suite, cases = suite_build(n_cases, name=f"bench-exp-{n_cases}")
    base_p = [rng.choice([1.0, 0.95, 0.9, 0.7, 0.4]) for _ in cases]
    experiment = Experiment.objects.create(
        suite=suite, name=f"bench {n_cases}", trials_per_case=TRIALS
    )
    for v in range(VARIANTS):
        shift = (v - VARIANTS / 2) * 0.02
        run = run_build(
            suite,
            cases,
            name=f"bench {n_cases} · v{v}",
            probs=[min(1.0, max(0.0, p + shift)) for p in base_p],
            graders=GRADERS,
            trials=TRIALS,
            rng=rng,
            output=lambda case, rng: f"answer {rng.randint(0, 9)} for {case.key} " * 20,
        )
        ExperimentVariant.objects.create(experiment=experiment, run=run, label=f"v{v}", position=v)
        run_summary_refresh(run=run)  # what run_finalize stores as a run closes
    experiment_decision_warm(run=run)  # what run_finalize does as the last variant closes
    return experiment


def measure(client: Client, url: str, *, cold: bool = False, repeats: int = 5) -> dict:
    """GET ``url``: median and min wall ms, median process CPU ms, database backend CPU ms per
    request (PostgreSQL; None on SQLite), the query count and the response bytes; ``cold``
    clears Django's cache before each request (the decision computed within the request)."""
    response = client.get(url)  # warm-up (imports, template loading)
    assert response.status_code == 200, response.status_code
    wall, cpu = [], []
    db_start = db_cpu_ms()
    for _ in range(repeats):
        if cold:
            cache.clear()
            caches["shared"].clear()
        start, start_cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    db_end = db_cpu_ms()
    if cold:
        cache.clear()
        caches["shared"].clear()
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


def profile(client: Client, url: str) -> None:
    """Print the 25 functions with the most cumulative time in one request of ``url``."""
    import cProfile
    import pstats

    client.get(url)
    profiler = cProfile.Profile()
    profiler.enable()
    client.get(url)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261207)
        lead = User.objects.create_user("lead", password="x")
        lead.groups.add(Group.objects.get(name="lead"))
        client = Client()
        client.force_login(lead)
        print(f"database: {connection.vendor}")
        sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or [200, 2000]
        for n_cases in sizes:
            start = time.perf_counter()
            experiment = build(n_cases, rng)
            analyze()
            built = time.perf_counter() - start
            first_case = experiment.suite.cases.order_by("key").first()
            decision_ms = []
            variants = experiment_variants(experiment=experiment)
            for _ in range(5):
                start_cpu = time.process_time()
                _decision_compute(experiment, variants)
                decision_ms.append((time.process_time() - start_cpu) * 1000)
            print(
                f"{VARIANTS} variants x {n_cases} cases x {TRIALS} trials, experiment_decision "
                f"alone: median process CPU {statistics.median(decision_ms):.0f} ms"
            )
            if "--profile" in sys.argv:
                profile(client, experiment.get_absolute_url())
            for label, url, cold in (
                ("first view, decision warmed at close", experiment.get_absolute_url(), False),
                ("first view, cache cleared", experiment.get_absolute_url(), True),
                (
                    "case view",
                    reverse(
                        "evals:experiment-case",
                        kwargs={"experiment_id": experiment.uuid, "case_key": first_case.uuid},
                    ),
                    False,
                ),
            ):
                m = measure(client, url, cold=cold)
                db = "" if m["db_cpu"] is None else f", database CPU {m['db_cpu']:.0f} ms"
                print(
                    f"{VARIANTS} variants x {n_cases} cases x {TRIALS} trials, {label}: "
                    f"median {m['median']:.0f} ms (min {m['min']:.0f} ms), process CPU "
                    f"{m['cpu']:.0f} ms{db}, {m['queries']} queries, "
                    f"{m['size'] / 1024:.0f} KiB, load {os.getloadavg()[0]:.1f} "
                    f"(built in {built:.0f} s)"
                )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
