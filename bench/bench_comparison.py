"""Benchmark ``evals.comparison.selectors.comparison_get``: server time and query count by run size.

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_comparison.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_cmp \
        .venv/bin/python bench/bench_comparison.py
    .venv/bin/python bench/bench_comparison.py --cases 200   (the smaller size only)

Builds a base and a head run of 200 and 2,000 cases x 5 trials with 2 gating graders
(``bench/_data.py``, as bench_report.py; ~2% pipeline errors, ~1% errored grades, head pass rates
a few points lower), then times ``comparison_get`` (median and min of 7 calls after one
warm-up, detectable drop cached as on the page) and once with a cold cache (the power
simulation included), and counts queries (CaptureQueriesContext).
"""

from __future__ import annotations

import argparse
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
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from evals.comparison.selectors import comparison_get  # noqa: E402
from evals.models import Run  # noqa: E402

TRIALS = 5
GRADERS = [{"key": "schema", "kind": "json_schema"}, {"key": "policy", "kind": "python"}]


def build(n_cases: int, rng: random.Random) -> tuple[Run, Run]:
    """A base and a head run of ``n_cases`` cases (``bench/_data.py``); a grader passes a
    base trial with probability ``sqrt(r)`` for a case rate ``r`` drawn uniformly, a head
    trial with ``sqrt(max(0, r - 0.05))``."""
    suite, cases = suite_build(n_cases, name=f"bench-cmp-{n_cases}")
    rates = [rng.random() for _ in cases]
    runs = [
        run_build(
            suite,
            cases,
            name=name,
            probs=[p**0.5 for p in probs],
            graders=GRADERS,
            trials=TRIALS,
            rng=rng,
            output=lambda case, rng: "x" * 2000,
            fail_score=0.5,
        )
        for name, probs in (("base", rates), ("head", [max(0.0, r - 0.05) for r in rates]))
    ]
    return runs[0], runs[1]


def measure(base: Run, head: Run, repeats: int = 7) -> dict[str, float]:
    base = Run.objects.select_related("suite").get(pk=base.pk)
    head = Run.objects.select_related("suite").get(pk=head.pk)
    cache.clear()
    start = time.perf_counter()
    with CaptureQueriesContext(connection) as ctx:
        comparison_get(base=base, head=head)
    cold = (time.perf_counter() - start) * 1000
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        comparison_get(base=base, head=head)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    with CaptureQueriesContext(connection) as warm_ctx:
        comparison_get(base=base, head=head)
    return {
        "median": statistics.median(wall),
        "min": min(wall),
        "cpu": statistics.median(cpu),
        "cold": cold,
        "queries_cold": len(ctx.captured_queries),
        "queries": len(warm_ctx.captured_queries),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--cases", default="200,2000", help="case counts per run, comma-separated (200,2000)"
    )
    sizes = [int(n) for n in parser.parse_args().cases.split(",")]
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261130)
        print(f"database: {connection.vendor}")
        for n_cases in sizes:
            base, head = build(n_cases, rng)
            analyze()
            m = measure(base, head)
            print(
                f"{n_cases} cases x {TRIALS} trials, two runs: median {m['median']:.0f} ms "
                f"(min {m['min']:.0f} ms, process CPU {m['cpu']:.0f} ms), "
                f"{m['queries']} queries; cold cache (power simulated) {m['cold']:.0f} ms, "
                f"{m['queries_cold']} queries"
            )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
