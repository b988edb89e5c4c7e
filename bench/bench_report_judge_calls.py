"""Benchmark the run report's "judge calls" usage (one extra query in
``evals.report.selectors.run_report``, on the call ledger): server time of
``run_report`` on runs whose trials all carry a judge grade with a ~3 KB prompt in
``details`` and one ledger row per call, against the same run without judge grades.

Usage (SQLite, throwaway test database):
    .venv/bin/python bench/bench_report_judge_calls.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench \
        .venv/bin/python bench/bench_report_judge_calls.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import TRIALS, build, connection, measure  # noqa: E402

from evals.models import Grade, Trial  # noqa: E402
from judges.models import JudgeCallRecord  # noqa: E402
from judges.versions import judge_version_create


def add_judge_grades(run, version, rng: random.Random) -> int:
    prompt = "Judge the fenced output. " * 120  # ~3 KB: the column the query must not load
    grades = [
        Grade(
            trial_id=tid,
            grader="judge",
            judge_version=version,
            status="ok",
            passed=rng.random() < 0.7,
            gating=False,
            reason="judge: PASS",
            details={
                "prompt": prompt,
                "raw_reply": '{"verdict": "PASS"}',
                "input_tokens": rng.randint(300, 900),
                "output_tokens": 60,
                "cost_usd": None if rng.random() < 0.05 else 0.00021,
            },
        )
        for tid in Trial.objects.filter(run=run, status="ok").values_list("id", flat=True)
    ]
    Grade.objects.bulk_create(grades, batch_size=2000)
    # The report reads judge spend from the call ledger: one row per call, as the judge rung
    # writes it (the grade keeps the same figures in its details).
    JudgeCallRecord.objects.bulk_create(
        [
            JudgeCallRecord(
                nonce=f"{g.trial_id:032x}",
                judge_version=version,
                run=run,
                trial_id=g.trial_id,
                grader=g.grader,
                status="answered",
                outcome="stored",
                attempts=1,
                input_tokens=g.details["input_tokens"],
                output_tokens=g.details["output_tokens"],
                cost_usd=g.details["cost_usd"],
            )
            for g in grades
        ],
        batch_size=2000,
    )
    return len(grades)


def main() -> None:
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rng = random.Random(20261130)
        version, _ = judge_version_create(
            judge_name="bench",
            kind="rubric",
            model="m",
            base_url="http://127.0.0.1:9/v1",
            prompt_template="",
            params={},
            output_schema={},
        )
        print(f"database: {connection.vendor}")
        for n_cases in (200, 2000):
            run = build(n_cases, rng)
            before = measure(run)
            n = add_judge_grades(run, version, rng)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE evals_trial, evals_grade, evals_case")
            after = measure(run)
            print(
                f"{n_cases} cases x {TRIALS} trials: without judge grades median "
                f"{before[0]:.0f} ms ({before[3]} queries); with {n} judge grades median "
                f"{after[0]:.0f} ms (min {after[1]:.0f} ms, {after[3]} queries)"
            )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
