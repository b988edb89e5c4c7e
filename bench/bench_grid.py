"""Benchmark the grid of runs page (``evals:suite-grid``): server time and query count.

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_grid.py [--trials N]
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_grid \
        .venv/bin/python bench/bench_grid.py

Builds one suite of 2,000 cases (10 tags) and 10 runs of N trials per case (default 3; one
gating grader; ~2% pipeline errors, ~1% errored grades, ~3% unknown costs; per-case pass
probabilities drawn from {1, 1, .9, .7, .4} and nudged per run), then fetches the grid
through Django's test client as a signed-in lead: median and min of 5 requests after one
warm-up (request to response, template rendered), and the query count
(CaptureQueriesContext), for 2 and 10 runs (query count must not grow), the whole grid
sorted by variance, and filtered to flaky cases. Also the case history page and the CSV
export of the 10-run grid. Target: < 500 ms for 10 runs × 2,000 cases. ``--other-runs N``
also builds N runs of the same shape in another suite first: the grid's figures must not
move with them.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from _data import run_build  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from evals.models import Case, Suite, content_hash  # noqa: E402

N_CASES, N_RUNS = 2000, 10
GRADERS = [{"key": "policy", "kind": "python"}]


def backend_cpu_ms() -> float | None:
    """CPU time (user + system, ms; the kernel counts in ticks of 10 ms) of the PostgreSQL
    backend serving this process's connection, read from /proc (the database runs on this
    machine); None on SQLite, whose work is in this process's own CPU time."""
    if connection.vendor != "postgresql":
        return None
    if not hasattr(backend_cpu_ms, "pid"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend_cpu_ms.pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{backend_cpu_ms.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def measure(
    client: Client, url: str, *, first_view: bool, repeats: int = 5
) -> tuple[float, float, float, float | None, int, int]:
    """(median wall ms, min wall ms, median CPU ms, median database CPU ms, query count,
    response bytes) of GET ``url``; ``first_view``: the cache is cleared before each request
    (no grid column cached), else each request is a repeat view. CPU time is this process's
    (the server side and the test client; with SQLite the database work too): on a machine
    shared with other jobs it is the figure that does not depend on their load. On
    PostgreSQL the database's CPU for the request is its backend's (``backend_cpu_ms``);
    None on SQLite."""
    response = client.get(url)
    assert response.status_code == 200, (response.status_code, response.content[:300])
    backend_cpu_ms()
    wall, cpu, db_cpu = [], [], []
    for _ in range(repeats):
        if first_view:
            cache.clear()
        start, start_cpu, start_db = time.perf_counter(), time.process_time(), backend_cpu_ms()
        response = client.get(url)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        if start_db is not None:
            db_cpu.append(backend_cpu_ms() - start_db)
    if first_view:
        cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    return (
        statistics.median(wall),
        min(wall),
        statistics.median(cpu),
        statistics.median(db_cpu) if db_cpu else None,
        len(ctx.captured_queries),
        len(response.content),
    )


def profile(client: Client, url: str) -> None:
    """Print the top functions (own time and cumulative) of one GET of ``url``, cache
    cleared first, and of a repeat view."""
    import cProfile
    import pstats

    client.get(url)
    for label in ("first view", "repeat view"):
        if label == "first view":
            cache.clear()
        profiler = cProfile.Profile()
        profiler.enable()
        client.get(url)
        profiler.disable()
        print(f"--- profile, {label}: {url}")
        stats = pstats.Stats(profiler).strip_dirs()
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=3, help="trials per case (default 3)")
    parser.add_argument(
        "--other-runs",
        type=int,
        default=0,
        help="also build this many runs of the same shape in another suite (default 0): "
        "the grid's time must not grow with what other runs hold",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile one first view and one repeat view of the 10-run grid (cProfile)",
    )
    args = parser.parse_args()
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261202)
        lead = User.objects.create_user("lead", password="x")
        lead.groups.add(Group.objects.get(name="lead"))
        client = Client()
        client.force_login(lead)
        suite = Suite.objects.create(name="bench-grid", kind=Suite.Kind.REGRESSION)
        cases = Case.objects.bulk_create(
            [
                Case(
                    suite=suite,
                    key=f"c{i:05d}",
                    input=f"q{i}",
                    tags=[f"t{i % 10}"],
                    content_hash=content_hash(input=f"q{i}", expected=None, context=[]),
                )
                for i in range(N_CASES)
            ],
            batch_size=1000,
        )
        base_p = [rng.choice([1.0, 1.0, 0.9, 0.7, 0.4]) for _ in cases]
        start = time.perf_counter()
        for r in range(N_RUNS):
            probs = [min(1.0, max(0.0, p + rng.choice([0, 0, 0.1, -0.1, -0.3]))) for p in base_p]
            run_build(
                suite,
                cases,
                name=f"run-{r:02d}",
                probs=probs,
                graders=GRADERS,
                trials=args.trials,
                rng=rng,
                output=lambda case, _rng: f"answer for {case.key} " * 20,
                # a small known cost: the grid shows it with significant digits, never $0.0000
                cost_usd=Decimal("0.00000510"),
            )
        if args.other_runs:
            other = Suite.objects.create(name="bench-grid-other", kind=Suite.Kind.REGRESSION)
            other_cases = Case.objects.bulk_create(
                [
                    Case(
                        suite=other,
                        key=c.key,
                        input=c.input,
                        tags=c.tags,
                        content_hash=c.content_hash,
                    )
                    for c in cases
                ],
                batch_size=1000,
            )
            for r in range(args.other_runs):
                run_build(
                    other,
                    other_cases,
                    name=f"other-{r:02d}",
                    probs=base_p,
                    graders=GRADERS,
                    trials=args.trials,
                    rng=rng,
                    output=lambda case, _rng: f"answer for {case.key} " * 20,
                    cost_usd=Decimal("0.00000510"),
                )
        print(
            f"load average {os.getloadavg()[0]:.1f}; database: {connection.vendor}; built "
            f"{N_RUNS} runs (and {args.other_runs} of another suite) x {N_CASES} cases x "
            f"{args.trials} trials in "
            f"{time.perf_counter() - start:.0f} s"
        )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE evals_trial, evals_grade, evals_case, evals_run")
        grid = reverse("evals:suite-grid", args=[suite.uuid])
        history = reverse("evals:case-history", args=[suite.uuid, cases[7].uuid])
        export = reverse("interop:grid-export", args=[suite.uuid])
        if args.profile:
            profile(client, grid + "?last=10")
        for label, url, first_view in (
            ("grid, last 2 runs, first view", grid + "?last=2", True),
            ("grid, last 2 runs, repeat view", grid + "?last=2", False),
            ("grid, 10 runs, sorted by variance, first view", grid + "?last=10", True),
            ("grid, 10 runs, sorted by variance, repeat view", grid + "?last=10", False),
            ("grid, 10 runs, flaky only, first view", grid + "?last=10&flaky=1", True),
            ("grid, 10 runs, flaky only, repeat view", grid + "?last=10&flaky=1", False),
            ("case history (10 runs)", history, False),
            ("grid CSV export, 10 runs, first view", export + "?last=10&format=csv", True),
            ("grid CSV export, 10 runs, repeat view", export + "?last=10&format=csv", False),
        ):
            median, best, cpu, db_cpu, queries, size = measure(client, url, first_view=first_view)
            db = "" if db_cpu is None else f", database CPU {db_cpu:.0f} ms"
            print(
                f"{label}: median {median:.0f} ms wall (min {best:.0f} ms), CPU {cpu:.0f} ms"
                f"{db}, {queries} queries, {size / 1024:.0f} KiB, load {os.getloadavg()[0]:.1f}"
            )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
