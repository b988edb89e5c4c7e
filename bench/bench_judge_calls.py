"""Benchmark the judge rung's calls with claims and the call ledger:
``judges.grading.judge_grade_trials`` on N ok trials against the shared mock in judge mode,
wall time against the ideal (N x latency / concurrency), this process's CPU time, and the
queries it made (the claims, the ledger and the grades; CaptureQueriesContext).

Usage (SQLite, throwaway test database):
    .venv/bin/python bench/bench_judge_calls.py [N] [LATENCY_MS] [CONCURRENCY]
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench \\
        .venv/bin/python bench/bench_judge_calls.py
Defaults: 400 trials, 200 ms, concurrency 16. Needs the shared mock (tests/mockllm.py).
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
from django.test.utils import CaptureQueriesContext  # noqa: E402

from evals.models import Case, Run, Suite, Trial  # noqa: E402
from judges.grading import judge_grade_trials  # noqa: E402
from judges.versions import judge_version_create  # noqa: E402
from tests.mockllm import mockllm_start  # noqa: E402


def build(n: int) -> list[Trial]:
    suite = Suite.objects.create(name=f"bench-judge-{n}")
    cases = Case.objects.bulk_create(
        Case(suite=suite, key=f"k{i:05d}", input=f"[case=k{i:05d} p=0.5 expect=A{i}] Q?")
        for i in range(n)
    )
    run = Run.objects.create(suite=suite, name="bench", target_kind="callable", status="running")
    Trial.objects.bulk_create(
        Trial(run=run, case=c, attempt=1, status="ok", output=f"A{i}") for i, c in enumerate(cases)
    )
    return list(Trial.objects.filter(run=run).select_related("case").order_by("id"))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    latency_ms = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = mockllm_start("--latency-ms", str(latency_ms), "--judge-flip", "0")
    try:
        version, _ = judge_version_create(
            judge_name="bench",
            kind="rubric",
            model="mock-judge",
            base_url=server.base_url,
            prompt_template="",
            params={"max_attempts": 1, "concurrency": concurrency},
            output_schema={},
        )
        trials = build(n)
        ideal = n * latency_ms / 1000 / concurrency
        cpu0, t0 = time.process_time(), time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            written = judge_grade_trials(trials=trials, judge_version=version)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        calls = server.stats()["requests"]
        print(
            f"{connection.vendor}: {n} trials, {latency_ms} ms, concurrency {concurrency}: "
            f"{written} grades, {calls} calls, {wall:.2f} s wall (ideal {ideal:.2f} s, "
            f"{100 * ideal / wall:.0f}% of it), {cpu:.2f} s CPU, {len(queries)} queries "
            f"({len(queries) / max(calls, 1):.1f} a call)"
        )
    finally:
        server.stop()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
