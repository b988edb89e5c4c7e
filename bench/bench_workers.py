"""Benchmark: does a run get faster with more workers?

One run of 200 cases × 5 trials against the shared mock at 200 ms, executed by 1, 2 and 4
Celery worker processes (``--pool solo``, one chunk at a time each, target concurrency 16
per chunk) through Redis and PostgreSQL, for each chunk size (``ASSAY_TRIAL_CHUNK_SIZE``).
The benchmark process starts the run (``run_start``: trials and outbox messages in one
transaction) and polls the database until the run ends, as a page does. It reports, per
configuration: wall seconds from ``run_start`` to the run's end, trials/s, the mock's
highest number of calls in flight, its call count (1,000: nothing doubled) and the passes
(653 of 1,000 when nothing is lost or doubled), and for one cancel per chunk size, the calls
made after the cancel (how prompt it is).

Usage: .venv/bin/python bench/bench_workers.py [--chunks 50,100,200,1000] [--workers 1,2,4]
       [--redis redis://127.0.0.1:6379/1] [--database assay_bench_workers]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _cluster import (
    CASES,
    DEFAULT_MOCK,
    TRIALS,
    Mock,
    Workers,
    database_fresh,
    environment,
    load_average,
    suite_make,
)


def run_once(suite, mock: Mock, chunk: int, *, cancel_after: int | None = None) -> dict:
    from django.conf import settings

    from evals.models import Grade, Trial
    from evals.runner.finalize import run_cancel
    from evals.runner.start import run_start

    settings.ASSAY["TRIAL_CHUNK_SIZE"] = chunk
    mock.reset()
    t0 = time.perf_counter()
    run = run_start(
        suite=suite,
        name=f"k{chunk}-{time.time_ns()}",
        target=mock.target(),
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=TRIALS,
    )
    after_cancel = None
    while True:
        run.refresh_from_db()
        due = cancel_after is not None and run.trials_finished >= cancel_after
        if due and after_cancel is None:
            run_cancel(run=run)
            at_cancel = mock.stats()["requests"]
            open_ = [Trial.Status.QUEUED, Trial.Status.RUNNING]
            while Trial.objects.filter(run=run, status__in=open_).exists():
                time.sleep(0.05)
            time.sleep(0.5)
            after_cancel = mock.stats()["requests"] - at_cancel
        if run.is_terminal and run.finished_at is not None:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    stats = mock.stats()
    return {
        "chunk": chunk,
        "status": run.status,
        "wall_s": round(wall, 2),
        "trials_per_s": round(CASES * TRIALS / wall, 1),
        "max_in_flight": stats["max_inflight"],
        "calls": stats["requests"],
        "recorded": Trial.objects.filter(run=run, status__in=Trial.FINISHED).count(),
        "passes": Grade.objects.filter(trial__run=run, grader="exact", passed=True).count(),
        "calls_after_cancel": after_cancel,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", default="50,100,200,1000")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--database", default="assay_bench_workers")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    env = environment(args.database, args.redis)
    database_fresh(args.database)
    from config.celery import app

    app.control.purge()
    suite = suite_make()
    mock = Mock(args.mock)
    workers = Workers(env, "celery", Path(tempfile.mkdtemp(prefix="assay-bench-workers-")))
    rows = []
    try:
        for n in (int(w) for w in args.workers.split(",")):
            for i in range(n):
                workers.worker(i)
            for chunk in (int(k) for k in args.chunks.split(",")):
                row = {"workers": n, **run_once(suite, mock, chunk), "load": load_average()}
                rows.append(row)
                if not args.json:
                    print(
                        f"workers={n} chunk={chunk:5} {row['status']:9} wall {row['wall_s']:6.2f}s "
                        f"{row['trials_per_s']:6.1f} trials/s  max in flight "
                        f"{row['max_in_flight']:3}  calls {row['calls']}  "
                        f"passes {row['passes']}  load {row['load']}",
                        flush=True,
                    )
            workers.stop_all()
        # Cancel promptness, one worker: cancel once 300 trials are done.
        workers.worker(0)
        for chunk in (int(k) for k in args.chunks.split(",")):
            row = {"workers": 1, **run_once(suite, mock, chunk, cancel_after=300)}
            row["cancel"] = True
            rows.append(row)
            if not args.json:
                print(
                    f"cancel at 300: chunk={chunk:5} calls {row['calls']} recorded "
                    f"{row['recorded']} calls after the cancel {row['calls_after_cancel']}",
                    flush=True,
                )
        if args.json:
            print(json.dumps(rows, indent=2))
    finally:
        workers.stop_all()
        mock.stop()


if __name__ == "__main__":
    main()
