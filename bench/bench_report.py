"""Benchmark ``evals.report.selectors.run_report``: server time and query count by run size.

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_report.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench \
        .venv/bin/python bench/bench_report.py

Builds runs of 200 and 2,000 cases x 5 trials with 2 graders (bulk_create; ~2% pipeline
errors, ~1% errored grades, ~3% unknown costs, 10 tags), then times ``run_report`` (median
and min of 9 calls after one warm-up, plus this process's CPU time and the PostgreSQL
backend's, ``_server_cpu``) and counts its queries (CaptureQueriesContext). Target (issue
17): < 150 ms at 2,000 cases x 5 trials, queries independent of size.
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
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from evals.models import Run  # noqa: E402
from evals.report.selectors import run_report  # noqa: E402

TRIALS = 5
GRADERS = [{"key": "schema", "kind": "json_schema"}, {"key": "policy", "kind": "python"}]


def build(n_cases: int, rng: random.Random) -> Run:
    suite, cases = suite_build(n_cases, name=f"bench-{n_cases}")
    probs = [rng.random() for _ in cases]
    return run_build(
        suite,
        cases,
        name="bench",
        probs=probs,
        graders=GRADERS,
        trials=TRIALS,
        rng=rng,
        output=lambda case, rng: "x" * 2000,
        fail_score=0.5,
    )


def measure(run: Run, repeats: int = 9) -> tuple[float, float, float, float | None, int]:
    """(median wall ms, min wall ms, median CPU ms of this process, the PostgreSQL
    backend's CPU ms per call (None on SQLite: its work is this process's), query count)."""
    run = Run.objects.select_related("suite").get(pk=run.pk)
    run_report(run=run)  # warm-up
    wall, cpu = [], []
    db_start = db_cpu_ms()
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        run_report(run=run)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    db_end = db_cpu_ms()
    db = None if db_start is None else (db_end - db_start) / repeats
    with CaptureQueriesContext(connection) as ctx:
        run_report(run=run)
    return (
        statistics.median(wall),
        min(wall),
        statistics.median(cpu),
        db,
        len(ctx.captured_queries),
    )


def main() -> None:
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261130)
        print(f"database: {connection.vendor}")
        for n_cases in (200, 2000):
            run = build(n_cases, rng)
            analyze()
            median, best, cpu, db, queries = measure(run)
            db_text = "" if db is None else f", database CPU {db:.0f} ms"
            print(
                f"{n_cases} cases x {TRIALS} trials x {len(GRADERS)} graders: median "
                f"{median:.0f} ms (min {best:.0f} ms, process CPU {cpu:.0f} ms{db_text}), "
                f"{queries} queries, load {os.getloadavg()[0]:.1f}"
            )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
