"""Benchmark ``evals.comparison.compute.comparison_get``: server time and query count by run size.

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_comparison.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_cmp \
        .venv/bin/python bench/bench_comparison.py

Builds a base and a head run of 200 and 2,000 cases x 5 trials with 2 gating graders
(bulk_create like bench_report.py; ~2% pipeline errors, ~1% errored grades, head pass rates
a few points lower), then times ``comparison_get`` (median and min of 7 calls after one
warm-up, detectable drop cached as on the page) and once with a cold cache (the power
simulation included), and counts queries (CaptureQueriesContext).
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

from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from evals.comparison.compute import comparison_get  # noqa: E402
from evals.models import Case, Grade, Run, Suite, Trial, content_hash  # noqa: E402

TRIALS = 5
GRADERS = [{"key": "schema", "kind": "json_schema"}, {"key": "policy", "kind": "python"}]


def build_run(
    suite: Suite, cases: list[Case], rates: list[float], name: str, rng: random.Random
) -> Run:
    run = Run.objects.create(
        suite=suite,
        name=name,
        target_kind="simulated",
        graders=GRADERS,
        trials_per_case=TRIALS,
        status="succeeded",
    )
    trials = []
    for case, p in zip(cases, rates, strict=True):
        for attempt in range(1, TRIALS + 1):
            error = rng.random() < 0.02
            trials.append(
                Trial(
                    run=run,
                    case=case,
                    attempt=attempt,
                    status="error" if error else "ok",
                    output="x" * 2000,
                    input_tokens=500,
                    output_tokens=rng.randint(50, 300),
                    latency_ms=rng.uniform(200, 3000),
                    cost_usd=None if rng.random() < 0.03 else Decimal("0.00120000"),
                )
            )
            trials[-1].p = p
    Trial.objects.bulk_create(trials, batch_size=1000)
    grades = []
    for trial in trials:
        if trial.status == "error":
            continue
        for g in GRADERS:
            if rng.random() < 0.01:
                grades.append(
                    Grade(
                        trial=trial,
                        grader=g["key"],
                        status="error",
                        passed=None,
                        reason="TimeoutError: oracle",
                    )
                )
            else:
                ok = rng.random() < trial.p**0.5
                grades.append(
                    Grade(
                        trial=trial,
                        grader=g["key"],
                        status="ok",
                        passed=ok,
                        score=1.0 if ok else 0.5,
                        reason="ok" if ok else "no",
                    )
                )
    Grade.objects.bulk_create(grades, batch_size=2000)
    return run


def build(n_cases: int, rng: random.Random) -> tuple[Run, Run]:
    suite = Suite.objects.create(name=f"bench-cmp-{n_cases}")
    cases = Case.objects.bulk_create(
        [
            Case(
                suite=suite,
                key=f"c{i:05d}",
                input=f"q{i}",
                tags=[f"t{i % 10}"],
                content_hash=content_hash(input=f"q{i}", expected=None, context=[]),
            )
            for i in range(n_cases)
        ],
        batch_size=1000,
    )
    rates = [rng.random() for _ in cases]
    base = build_run(suite, cases, rates, "base", rng)
    head = build_run(suite, cases, [max(0.0, r - 0.05) for r in rates], "head", rng)
    return base, head


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
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261130)
        print(f"database: {connection.vendor}")
        for n_cases in (200, 2000):
            base, head = build(n_cases, rng)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE evals_trial, evals_grade, evals_case")
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
