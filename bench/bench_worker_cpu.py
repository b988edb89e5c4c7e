"""Benchmark: a worker's CPU per trial, and its memory over a long run.

One run of ``--cases`` × ``--trials`` (default 2,000 × 5) against the shared mock, a
``contains`` grader (substring of the case's expected answer), target concurrency ``-c``
(default 64), executed by ONE Celery worker process (``--pool solo``: the process that does
the work is the one measured) on the embedded default (SQLite, filesystem broker) or on
PostgreSQL + Redis. The benchmark process starts the run with ``run_start`` and polls the
database, as a page does.

Reported: the worker's CPU (user + system, ``/proc/<pid>/stat``) from the run's start to its
end, divided by the trials: CPU-ms per trial, everything the worker does included (claims,
target calls through httpx, writes, pricing, grading, leases, heartbeat, broker); wall
seconds; passes (6,539 of 10,000 at 2,000 × 5 when nothing is lost or doubled); the
worker's RSS every second (first, peak, last). With ``--profile FILE`` py-spy samples the
worker (``py-spy record --nonblocking``, raw collapsed stacks into FILE) and the top entries
by own time and by inclusive time are printed: both fold line numbers away.

Usage: .venv/bin/python bench/bench_worker_cpu.py [--broker embedded|redis]
       [--cases 2000] [--trials 5] [-c 64] [--latency-ms 200] [--chunk N]
       [--database assay_bench_cpu] [--redis redis://127.0.0.1:6379/1] [--profile FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _cluster import DEFAULT_MOCK, Mock, Workers, database_fresh, environment, load_average
from _cluster import suite_make as _suite_make

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (and its reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + cutime + cstime) / TICKS


def process_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class RssSampler(threading.Thread):
    """The RSS of ``pid`` every ``every_s`` seconds, with the trials finished at that time."""

    def __init__(self, pid: int, every_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.wait(self.every_s):
            self.samples.append((time.monotonic() - t0, process_rss_mb(self.pid)))


def profile_top(path: Path, n: int = 25) -> tuple[int, list, list]:
    """(samples, top by own samples, top by inclusive samples) of a py-spy raw file."""
    own: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        total += samples
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
        own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    return total, own.most_common(n), inclusive.most_common(n)


def run_once(suite, mock: Mock, *, concurrency: int, trials: int, worker_pid: int) -> dict:
    from evals.models import Grade, Trial
    from evals.runner.start import run_start

    mock.reset()
    rss = RssSampler(worker_pid)
    rss.start()
    cpu0 = process_cpu_s(worker_pid)
    t0 = time.perf_counter()
    run = run_start(
        suite=suite,
        name=f"cpu-{time.time_ns()}",
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            # A built-in price of input and output only: every trial is priced (the mock
            # reports no cached tokens, which a price with cached input would need).
            "model": "example-model-1.5",
            "prompt_template": "$input",
            "timeout_s": 30.0,
            "concurrency": concurrency,
        },
        graders=[{"key": "contains", "kind": "contains"}],
        trials_per_case=trials,
    )
    while True:
        run.refresh_from_db()
        if run.is_terminal and run.finished_at is not None:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    cpu = process_cpu_s(worker_pid) - cpu0
    rss.stop.set()
    rss.join()
    n = run.trials_total
    stats = mock.stats()
    mbs = [mb for _, mb in rss.samples] or [process_rss_mb(worker_pid)]
    return {
        "status": run.status,
        "trials": n,
        "wall_s": round(wall, 2),
        "pct_of_c_over_l": round(100 * (n / wall) / (concurrency / (mock.latency_ms / 1000)), 1),
        "worker_cpu_s": round(cpu, 2),
        "cpu_ms_per_trial": round(1000 * cpu / n, 3),
        "calls": stats["requests"],
        "max_in_flight": stats["max_inflight"],
        "passes": Grade.objects.filter(trial__run=run, passed=True).count(),
        "errored": Trial.objects.filter(run=run, status=Trial.Status.ERROR).count(),
        "rss_mb_first": round(mbs[0], 1),
        "rss_mb_peak": round(max(mbs), 1),
        "rss_mb_last": round(mbs[-1], 1),
        "rss_samples": [(round(t, 1), round(mb, 1)) for t, mb in rss.samples],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", choices=["embedded", "redis"], default="embedded")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=None, help="ASSAY_TRIAL_CHUNK_SIZE")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--database", default="assay_bench_cpu")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--profile", default=None, help="py-spy raw output file")
    parser.add_argument("--rss-out", default=None, help="write the RSS samples (JSON) here")
    args = parser.parse_args()

    extra = {"ASSAY_TRIAL_CHUNK_SIZE": str(args.chunk)} if args.chunk else {}
    redis = args.redis if args.broker == "redis" else ""
    database = args.database if args.broker == "redis" else None
    env = environment(database, redis, extra)
    database_fresh(database)
    if redis:
        from config.celery import app

        app.control.purge()
    suite = _suite_make(cases=args.cases)
    mock = Mock(args.mock, latency_ms=args.latency_ms)
    mock.latency_ms = args.latency_ms
    workers = Workers(env, "celery", Path(tempfile.mkdtemp(prefix="assay-bench-cpu-")))
    spy = None
    try:
        worker = workers.worker(0)
        if args.profile:
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(worker.pid), "--rate", "200",
                 "--nonblocking", "--format", "raw", "--output", args.profile],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            time.sleep(1.0)
        for _ in range(args.repeat):
            row = run_once(
                suite,
                mock,
                concurrency=args.concurrency,
                trials=args.trials,
                worker_pid=worker.pid,
            )
            samples = row.pop("rss_samples")
            if args.rss_out:
                Path(args.rss_out).write_text(json.dumps(samples))
            print(json.dumps({"broker": args.broker, **row, "load": load_average()}), flush=True)
        if spy is not None:
            os.killpg(spy.pid, signal.SIGINT)
            spy.wait(timeout=60)
            total, own, inclusive = profile_top(Path(args.profile))
            print(f"py-spy samples: {total}")
            print("top by own samples:")
            for frame, count in own:
                print(f"  {100 * count / total:5.1f}%  {frame}")
            print("top by inclusive samples:")
            for frame, count in inclusive:
                print(f"  {100 * count / total:5.1f}%  {frame}")
    finally:
        if spy is not None and spy.poll() is None:
            os.killpg(spy.pid, signal.SIGKILL)
        workers.stop_all()
        mock.stop()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
