"""Benchmark: instant start and instant end, on both brokers.

One Celery worker (``--pool solo``, as ``make demo`` starts it) on the embedded default
(SQLite, the filesystem broker of core/filesystem_broker.py) or on PostgreSQL + Redis, and
the shared mock at ``--latency-ms`` (default 200). Small runs (``--cases`` × 1 trial, an
``exact`` grader, concurrency 64), ``--repeat`` times each:

- **pickup**: the benchmark process starts a run with ``run_start`` inside its own
  transaction whose first ``on_commit`` hook notes the time: the commit. Measured: the
  mock's first request (``/admin/stats`` ``t_first``) minus that commit time. Everything
  between is on the path: the outbox publish, the broker, the worker's pickup, the chunk's
  claim, the call pool's start and the first call's connect.
- **wait**: ``manage.py run_suite bench --target FILE --wait`` as users run it (a new
  process). Measured: command start to the first request; the run's end (``finished_at``)
  and the last trial's write (its ``finished_at``) to the command's exit (``wait()``
  returned in this process).

Times are wall clock (``time.time()``, the same clock in every process on one machine).

Usage: .venv/bin/python bench/bench_start.py [--broker embedded|redis|both] [--repeat 5]
       [--cases 20] [--database assay_bench_start] [--redis redis://127.0.0.1:6379/1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cluster import (
    DEFAULT_MOCK,
    ROOT,
    Mock,
    Workers,
    database_fresh,
    environment,
    load_average,
    suite_make,
)


def target(mock: Mock) -> dict:
    return {
        "kind": "openai",
        "base_url": mock.base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        "timeout_s": 30.0,
        "concurrency": 64,
    }


def pickup_once(suite, mock: Mock) -> float:
    """Seconds from the run's commit to the mock's first request."""
    from django.db import transaction

    from evals.models import Run
    from evals.runner.start import run_start

    mock.reset()
    committed: list[float] = []
    with transaction.atomic():
        transaction.on_commit(lambda: committed.append(time.time()))
        run = run_start(
            suite=suite,
            name=f"pickup-{time.time_ns()}",
            target=target(mock),
            graders=[{"key": "exact", "kind": "exact"}],
            trials_per_case=1,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if Run.objects.filter(id=run.id, finished_at__isnull=False).exists():
            break
        time.sleep(0.05)
    first = mock.stats()["t_first"]
    return first - committed[0]


def wait_once(mock: Mock, env: dict, folder: Path) -> dict:
    """One ``run_suite --wait`` in a new process: its times around the run."""
    from django.db.models import Max

    from evals.models import Run, Trial

    mock.reset()
    target_file = folder / "target.json"
    target_file.write_text(json.dumps(target(mock)))
    graders_file = folder / "graders.json"
    graders_file.write_text(json.dumps([{"key": "exact", "kind": "exact"}]))
    name = f"wait-{time.time_ns()}"
    started = time.time()
    process = subprocess.run(
        [sys.executable, "manage.py", "run_suite", "bench", "--target", str(target_file),
         "--graders", str(graders_file), "--trials", "1", "--wait", "--name", name],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    exited = time.time()
    if process.returncode != 0:
        raise RuntimeError(f"run_suite exited {process.returncode}: {process.stderr[-2000:]}")
    run = Run.objects.get(name=name)
    last_write = Trial.objects.filter(run=run).aggregate(last=Max("finished_at"))["last"]
    first = mock.stats()["t_first"]
    return {
        "start_to_first_call_s": first - started,
        "run_end_to_exit_s": exited - run.finished_at.timestamp(),
        "last_write_to_exit_s": exited - last_write.timestamp(),
        "command_s": exited - started,
    }


def summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.3f} s, max {max(values):.3f} s "
        f"(n={len(values)}: {', '.join(f'{v:.3f}' for v in values)})"
    )


def measure(broker: str, args) -> dict:
    redis = args.redis if broker == "redis" else ""
    database = args.database if broker == "redis" else None
    env = environment(database, redis)
    database_fresh(database)
    if redis:
        from config.celery import app

        app.control.purge()
    suite = suite_make(cases=args.cases)
    mock = Mock(args.mock, latency_ms=args.latency_ms)
    folder = Path(tempfile.mkdtemp(prefix="assay-bench-start-"))
    workers = Workers({**env}, "celery", folder)
    try:
        workers.worker(0)
        time.sleep(1.0)  # the worker settles (heartbeat written, consumer started)
        pickups = [pickup_once(suite, mock) for _ in range(args.repeat)]
        waits = [wait_once(mock, {**workers.env}, folder) for _ in range(args.repeat)]
    finally:
        workers.stop_all()
        mock.stop()
    row = {
        "broker": broker,
        "commit_to_first_call": summary(pickups),
        "command_start_to_first_call": summary([w["start_to_first_call_s"] for w in waits]),
        "run_end_to_exit": summary([w["run_end_to_exit_s"] for w in waits]),
        "last_write_to_exit": summary([w["last_write_to_exit_s"] for w in waits]),
        "command": summary([w["command_s"] for w in waits]),
        "load": load_average(),
    }
    for key, value in row.items():
        print(f"{key:28} {value}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", choices=["embedded", "redis", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--database", default="assay_bench_start")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    args = parser.parse_args()
    brokers = ["embedded", "redis"] if args.broker == "both" else [args.broker]
    if len(brokers) > 1:
        # Settings are read once per process: one broker per process.
        for broker in brokers:
            subprocess.run(
                [sys.executable, __file__, "--broker", broker, *_rest(sys.argv[1:])], check=True
            )
        return
    measure(brokers[0], args)


def _rest(argv: list[str]) -> list[str]:
    """``argv`` without its ``--broker`` option."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        if item == "--broker":
            skip = True
            continue
        if item.startswith("--broker="):
            continue
        out.append(item)
    return out


if __name__ == "__main__":
    main()
