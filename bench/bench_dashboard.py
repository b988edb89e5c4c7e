"""Benchmark the dashboard pages: run list and case view (server time, queries, bytes).

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_dashboard.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_dash \
        .venv/bin/python bench/bench_dashboard.py

1. Run list: 500 runs x 100 trials (1 grader, ~2% errored grades, ~3% unknown costs); GET
   /runs/ (first page of 50) and /runs/?status=succeeded through Django's test client.
2. Case view (huge outputs): one case with 31 trials, 30 outputs of 1,000,000 characters and one
   5 MB data: URI; GET the case page (previews only) and one trial page (full output).
Each figure is the median of 5 requests after one warm-up; queries via CaptureQueriesContext.
On PostgreSQL the tables are ANALYZEd after the bulk load (see ``analyze``).
"""

from __future__ import annotations

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

from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from evals.models import Case, Grade, Run, Suite, Trial  # noqa: E402

GRADERS = [{"key": "has", "kind": "contains", "config": {"value": "4"}}]


def build_runs(n_runs: int, trials_per_run: int, rng: random.Random) -> Suite:
    suite = Suite.objects.create(name="bench-list")
    cases = [
        Case.objects.create(suite=suite, key=f"c{i}", input=f"q{i}", expected="4")
        for i in range(trials_per_run // 5)
    ]
    runs = Run.objects.bulk_create(
        [
            Run(
                suite=suite,
                name=f"run {i}",
                target_kind="simulated",
                graders=GRADERS,
                status="succeeded" if i % 4 else "failed",
                trials_per_case=5,
            )
            for i in range(n_runs)
        ]
    )
    trials = [
        Trial(
            run=run,
            case=case,
            attempt=a,
            status="ok",
            output="4",
            cost_usd=None if rng.random() < 0.03 else Decimal("0.0012"),
        )
        for run in runs
        for case in cases
        for a in range(1, 6)
    ]
    Trial.objects.bulk_create(trials, batch_size=2000)
    grades = []
    for trial in trials:
        if rng.random() < 0.02:
            grades.append(
                Grade(trial=trial, grader="has", status="error", passed=None, reason="unparseable")
            )
        else:
            grades.append(
                Grade(trial=trial, grader="has", status="ok", passed=rng.random() < 0.7, reason="r")
            )
    Grade.objects.bulk_create(grades, batch_size=2000)
    return suite


def build_huge_case() -> tuple[Run, Case, Trial]:
    suite = Suite.objects.create(name="bench-huge")
    case = Case.objects.create(suite=suite, key="huge", input="q", expected="4")
    run = Run.objects.create(suite=suite, name="huge", target_kind="simulated", status="succeeded")
    Trial.objects.bulk_create(
        [
            Trial(
                run=run,
                case=case,
                attempt=a,
                status="ok",
                output=("lorem ipsum " * 83334)[:1_000_000],
            )
            for a in range(1, 31)
        ]
        + [
            Trial(
                run=run,
                case=case,
                attempt=31,
                status="ok",
                output="data:image/png;base64," + "A" * (5 * 1024 * 1024),
            )
        ]
    )
    return run, case, Trial.objects.get(run=run, attempt=31)


def analyze() -> None:
    """Refresh planner statistics after the bulk load, as autovacuum would (PostgreSQL only;
    without it the planner guesses from empty tables and the list takes ~2 s)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def measure(client: Client, url: str, repeats: int = 5) -> tuple[float, int, int]:
    """(median ms, queries, response bytes) of GET ``url``."""
    client.get(url)
    times = []
    for _ in range(repeats):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(queries), len(response.content)


def main() -> None:
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        print(f"database: {connection.vendor}")
        user = User.objects.create_user("bench", password="bench-pass-1")
        user.groups.add(Group.objects.get(name="engineer"))
        client = Client()
        client.force_login(user)
        build_runs(500, 100, random.Random(20261130))
        analyze()
        for url in ("/runs/", "/runs/?status=succeeded", "/runs/?page=10"):
            ms, n, size = measure(client, url)
            print(
                f"run list {url:<26} 500 runs x 100 trials: {ms:7.1f} ms  {n} queries  "
                f"{size / 1024:6.1f} KiB"
            )
        run, case, big = build_huge_case()
        analyze()
        ms, n, size = measure(client, f"/runs/{run.uuid}/cases/{case.uuid}/")
        print(
            f"case view, 30 x 1M chars + 5 MB data URI: {ms:7.1f} ms  {n} queries  "
            f"{size / 1024:6.1f} KiB"
        )
        ms, n, size = measure(client, f"/trials/{big.uuid}/")
        print(
            f"trial page, 5 MB output:                  {ms:7.1f} ms  {n} queries  "
            f"{size / 1024:6.1f} KiB"
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
