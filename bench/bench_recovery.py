"""Benchmark: how long after ``kill -9`` of a worker does the run finish?

Default settings (``ASSAY_TRIAL_LEASE_SECONDS``, ``ASSAY_SWEEP_SECONDS``,
``ASSAY_TRIAL_CHUNK_SIZE`` as shipped), Redis and PostgreSQL, two Celery workers
(``--pool solo``) and Celery beat (the sweeper). One run of 200 cases × 5 trials against the
shared mock at 200 ms, graded by ``exact`` and by a judge version on the same mock (judge
mode), so the target and the judge rung recover together. Once ``--kill-at`` trials are
done, the worker holding a chunk is killed with SIGKILL (its process group: no warm
shutdown, nothing acknowledged). Reported: seconds from the kill to the run's end, the
run's status, its trials, ok trials, judge grades (one per ok trial: none missing, none
doubled) and the mock's calls (target + judge; the excess over trials + judge grades is
what the killed worker had in flight).

Usage: .venv/bin/python bench/bench_recovery.py [--repeat 2] [--kill-at 300]
       [--redis redis://127.0.0.1:6379/1] [--database assay_bench_recovery]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _cluster import (
    DEFAULT_MOCK,
    TRIALS,
    Mock,
    Workers,
    database_fresh,
    environment,
    load_average,
    suite_make,
)


def recover_once(suite, mock: Mock, cluster: Workers, kill_at: int) -> dict:
    from django.conf import settings

    from evals.models import Grade, Trial
    from evals.runner.start import run_start
    from judges.versions import judge_version_create

    version, _ = judge_version_create(
        judge_name=f"bench-{time.time_ns()}",
        kind="rubric",
        model="mock-judge",
        base_url=mock.base_url,
        prompt_template="",
        params={"max_attempts": 4},
        output_schema={},
    )
    mock.reset()
    # Both workers take chunks; the first is killed while it holds one.
    victim, survivor = cluster.worker(0), cluster.worker(1)
    run = run_start(
        suite=suite,
        name=f"recovery-{time.time_ns()}",
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            "model": "mock-model",
            "prompt_template": "$input",
            "timeout_s": 30.0,
        },
        graders=[
            {"key": "exact", "kind": "exact"},
            {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}},
        ],
        trials_per_case=TRIALS,
    )
    while Trial.objects.filter(run=run, status__in=Trial.FINISHED).count() < kill_at:
        time.sleep(0.05)
    cluster.kill(victim)
    killed = time.perf_counter()
    held = Trial.objects.filter(run=run, status=Trial.Status.RUNNING).count()
    while True:
        run.refresh_from_db()
        if run.is_terminal:
            break
        time.sleep(0.25)
    recovery = time.perf_counter() - killed
    ok = Trial.objects.filter(run=run, status=Trial.Status.OK).count()
    row = {
        "lease_s": settings.ASSAY["TRIAL_LEASE_SECONDS"],
        "sweep_s": settings.ASSAY["SWEEP_SECONDS"],
        "chunk": settings.ASSAY["TRIAL_CHUNK_SIZE"],
        "recovery_s": round(recovery, 1),
        "status": run.status,
        "trials": Trial.objects.filter(run=run).count(),
        "ok": ok,
        "running_at_kill": held,
        "judge_grades": Grade.objects.filter(trial__run=run, grader="judge").count(),
        "exact_grades": Grade.objects.filter(trial__run=run, grader="exact").count(),
        "calls": mock.stats()["requests"],
        "load": load_average(),
    }
    cluster.kill(survivor)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--kill-at", type=int, default=300)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--database", default="assay_bench_recovery")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    env = environment(args.database, args.redis)
    database_fresh(args.database)
    from config.celery import app

    app.control.purge()
    suite = suite_make()
    mock = Mock(args.mock)
    cluster = Workers(env, "celery", Path(tempfile.mkdtemp(prefix="assay-bench-recovery-")))
    rows = []
    try:
        cluster.beat()
        for _ in range(args.repeat):
            row = recover_once(suite, mock, cluster, args.kill_at)
            rows.append(row)
            if not args.json:
                print(
                    f"lease {row['lease_s']}s sweep {row['sweep_s']}s chunk {row['chunk']}: "
                    f"run {row['status']} {row['recovery_s']}s after kill -9; trials "
                    f"{row['trials']} ok {row['ok']} exact {row['exact_grades']} judge "
                    f"{row['judge_grades']}; calls {row['calls']} (expected "
                    f"{row['ok'] + row['judge_grades']} + in flight at the kill); "
                    f"{row['running_at_kill']} running at the kill; load {row['load']}",
                    flush=True,
                )
        if args.json:
            print(json.dumps(rows, indent=2))
    finally:
        cluster.stop_all()
        mock.stop()


if __name__ == "__main__":
    main()
