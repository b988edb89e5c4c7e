"""Time a run export (CSV and Parquet) of 10,000 trials with one grader, in SQLite in memory.

Run: ``DJANGO_SETTINGS_MODULE=config.settings_test .venv/bin/python bench/bench_exports.py``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

N = 10_000


def main() -> None:
    setup_test_environment()
    connection.creation.create_test_db(verbosity=0)
    from evals.models import Case, Grade, Run, Suite, Trial
    from interop import exports

    suite = Suite.objects.create(name="bench")
    cases = [Case(suite=suite, key=f"c{i:05d}", input=f"q{i}", tags=["a"]) for i in range(N)]
    for c in cases:
        c.content_hash = "x" * 64
    Case.objects.bulk_create(cases)
    run = Run.objects.create(
        suite=suite,
        name="r",
        target_kind="callable",
        status="succeeded",
        graders=[{"key": "g", "kind": "exact_match", "config": {}}],
    )
    trials = Trial.objects.bulk_create(
        [
            Trial(
                run=run,
                case=c,
                attempt=1,
                status="ok",
                output="answer",
                latency_ms=1.5,
                input_tokens=10,
                output_tokens=2,
            )
            for c in Case.objects.all()
        ]
    )
    Grade.objects.bulk_create([Grade(trial=t, grader="g", passed=True, score=1.0) for t in trials])
    for fmt in exports.FORMATS:
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as q:
            body = exports.table_write(table=exports.run_table(run=run), fmt=fmt)
        ms = (time.perf_counter() - start) * 1000
        print(
            f"{fmt}: {N} trials in {ms:.0f} ms, {len(q.captured_queries)} queries, "
            f"{len(body) / 1e6:.2f} MB"
        )


if __name__ == "__main__":
    main()
