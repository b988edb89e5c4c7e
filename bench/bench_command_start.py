"""Benchmark: the start of ``manage.py run_suite`` on a large run (C = 256).

Where the time goes from the command's start to the first call of a 2,000 × 5 run: one
new ``manage.py run_suite bench --target FILE --graders FILE --trials 5`` process (no
``--wait``: it exits once its run is committed and its messages are sent, which is the
part of ``--wait`` before the first call), with real workers and the shared mock.

Per repeat, times from the command's start (``time.time()``, one clock on one machine):

- **run created**: the run row's ``created_at`` (stamped in the command before its insert);
- **first sent** / **last sent**: the first and last of the run's chunk messages handed to
  the broker (``OutboxMessage.sent_at``);
- **first call**: the mock's first request (``/admin/stats`` ``t_first``);
- **exit**: the command's exit; **CPU**: the command's user + system CPU (``wait4``), the
  load-independent figure.

After the first call the run is cancelled (``run_cancel``) and the calls in flight are let
to end, so a repeat costs seconds, not a whole run; the next repeat starts once no trial
of it runs. Embedded: SQLite and the filesystem broker, one worker; ``--broker redis``:
PostgreSQL + Redis, ``--workers`` workers (default 2). ``--warm`` untimed runs first.

Usage: .venv/bin/python bench/bench_command_start.py --broker embedded|redis [--repeat 5]
       [--cases 2000] [--trials 5] [--concurrency 256] [--workers 2]
       [--database assay_bench_cmd] [--redis redis://127.0.0.1:6379/1]
"""

from __future__ import annotations

import argparse
import json
import os
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


def _files(folder: Path, mock: Mock, concurrency: int) -> tuple[Path, Path]:
    target = folder / "target.json"
    target.write_text(
        json.dumps(
            {
                "kind": "openai",
                "base_url": mock.base_url,
                "model": "mock-model",
                "prompt_template": "$input",
                "concurrency": concurrency,
            }
        )
    )
    graders = folder / "graders.json"
    graders.write_text(
        json.dumps(
            [
                {
                    "key": "answer",
                    "kind": "contains",
                    "config": {"word": False, "case_sensitive": True},
                }
            ]
        )
    )
    return target, graders


def once(args, mock: Mock, env: dict, folder: Path, *, trials: int) -> dict:
    """One command, timed; the run cancelled after its first call."""
    from core.models import OutboxMessage
    from evals.models import Run, Trial
    from evals.runner.finalize import run_cancel
    from evals.runner.start import run_subject

    target, graders = _files(folder, mock, args.concurrency)
    mock.reset()
    name = f"start-{time.time_ns()}"
    argv = [
        sys.executable, "manage.py", "run_suite", "bench", "--target", str(target),
        "--graders", str(graders), "--trials", str(trials), "--name", name, "--json",
    ]  # fmt: skip
    log = (folder / f"{name}.log").open("wb")
    started = time.time()
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(process.pid, 0)
    exited = time.time()
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"run_suite failed: {(folder / f'{name}.log').read_text()[-2000:]}")
    run = Run.objects.get(name=name)
    deadline = time.monotonic() + 60
    first = None
    while time.monotonic() < deadline:
        first = mock.stats()["t_first"]
        if first:
            break
        time.sleep(0.02)
    if first is None:
        raise RuntimeError("no call within 60 s of the command's exit")
    run_cancel(run=run)
    while Trial.objects.filter(run=run, status=Trial.Status.RUNNING).exists():
        time.sleep(0.1)
    sent = list(
        OutboxMessage.objects.filter(subject=run_subject(run.id), sent_at__isnull=False)
        .order_by("sent_at")
        .values_list("sent_at", flat=True)
    )
    return {
        "run_created_s": run.created_at.timestamp() - started,
        "first_sent_s": sent[0].timestamp() - started if sent else None,
        "last_sent_s": sent[-1].timestamp() - started if sent else None,
        "messages": len(sent),
        "first_call_s": first - started,
        "exit_s": exited - started,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "load": load_average(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", choices=["embedded", "redis"], required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warm", type=int, default=1, help="untimed runs first (20 × 1)")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2, help="with --broker redis")
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--database", default="assay_bench_cmd")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--out", default=None, help="append the rows as JSON lines here")
    args = parser.parse_args()
    redis = args.redis if args.broker == "redis" else ""
    database = args.database if args.broker == "redis" else None
    env = environment(database, redis)
    database_fresh(database)
    if redis:
        subprocess.run(["redis-cli", "-u", redis, "flushdb"], check=True, capture_output=True)
    suite_make(cases=args.cases)
    mock = Mock(args.mock, latency_ms=args.latency_ms)
    folder = Path(tempfile.mkdtemp(prefix="assay-bench-cmd-"))
    workers = Workers({**env}, "celery", folder)
    rows = []
    try:
        for n in range(args.workers if redis else 1):
            workers.worker(n)
        time.sleep(1.0)  # the workers settle (heartbeat written, consumer started)
        for _ in range(args.warm):
            once(args, mock, workers.env, folder, trials=1)
        for _ in range(args.repeat):
            row = once(args, mock, workers.env, folder, trials=args.trials)
            rows.append(row)
            print(
                "  ".join(
                    f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                ),
                flush=True,
            )
    finally:
        workers.stop_all()
        mock.stop()
    print(f"broker {args.broker}, {args.cases} × {args.trials}, C = {args.concurrency}")
    for key in ("run_created_s", "first_sent_s", "first_call_s", "last_sent_s", "exit_s", "cpu_s"):
        values = [r[key] for r in rows if r[key] is not None]
        if values:
            print(
                f"{key:14} median {statistics.median(values):.3f}  "
                f"min {min(values):.3f}  max {max(values):.3f}  (n={len(values)})"
            )
    if args.out:
        with open(args.out, "a") as handle:
            for row in rows:
                handle.write(json.dumps({"broker": args.broker, **row}) + "\n")


if __name__ == "__main__":
    main()
