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
and min of 7 requests (3 cold) after one warm-up (request to response, template rendered),
and the query count (CaptureQueriesContext), with the cache cleared before each request
(first view of a pair of runs) and with the comparison cached (``evals.comparison.cache``).
Target: < 500 ms at 2,000 cases x 5 trials, with a query count that does not grow with
the run.
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
from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from evals.models import Run, Suite  # noqa: E402

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
    client: Client, url: str, *, cold: bool, repeats: int = 7
) -> tuple[float, float, int, int]:
    """(median ms, min ms, query count, response bytes) of GET ``url``; ``cold`` clears
    Django's cache before each request (comparison and detectable-drop caches: the first
    view of a pair of runs), else the comparison comes from the cache (every later view:
    filtering, sorting, paging)."""
    response = client.get(url)  # warm-up (imports, template loading)
    assert response.status_code == 200, response.status_code
    wall = []
    for _ in range(repeats):
        if cold:
            cache.clear()
        start = time.perf_counter()
        response = client.get(url)
        wall.append((time.perf_counter() - start) * 1000)
    if cold:
        cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    return statistics.median(wall), min(wall), len(ctx.captured_queries), len(response.content)


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
            url = reverse("evals:comparison", args=[head.uuid, base.uuid])
            for label, suffix, cold in (
                ("first view (cold cache)", "", True),
                ("page (comparison cached)", "", False),
                ("filtered to broken (cached)", "?change=broken", False),
            ):
                median, best, queries, size = measure(
                    client, url + suffix, cold=cold, repeats=3 if cold else 7
                )
                print(
                    f"{n_cases} cases x {TRIALS} trials, {label}: median {median:.0f} ms "
                    f"(min {best:.0f} ms), {queries} queries, {size / 1024:.0f} KiB"
                )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
