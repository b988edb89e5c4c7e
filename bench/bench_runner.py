"""Benchmark: end-to-end run throughput of the runner services, database writes included.

Starts ../shared/tools/mockllm/server.py (--latency-ms 200 --jitter-ms 0, seed 1234) and,
for each chunk size and target concurrency C in (16, 64), runs a 200-case × 5-trial suite
through ``evals.runner.start.run_start`` with Celery eager, so every chunk task executes in this
process (claim, concurrent calls, per-trial writes, pricing, an ``exact`` grade, finalize).
It reports, per configuration:

- wall: seconds from ``run_start`` to the run's end (trial creation and all writes included);
- % of C/latency: (1000 trials / wall) ÷ (C / 0.200 s);
- max in flight and the mock's own span (first request to last response) from /admin/stats;
- passes: ok grades of the ``exact`` grader; the mock's README quotes 653 of 1000;
- trials/s and CPU seconds of this process per 1,000 trials.

Database: a fresh SQLite file (default) or, with ``--postgres``, a fresh PostgreSQL database
``assay_bench_runner`` on 127.0.0.1 (dropped afterwards).

Usage: .venv/bin/python bench/bench_runner.py [--postgres] [--chunks 64,256] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_MOCK = ROOT.parent / "shared" / "tools" / "mockllm" / "server.py"
LATENCY_S = 0.200
CASES, TRIALS = 200, 5
PG_URL = "postgres://postgres@127.0.0.1:5432/assay_bench_runner"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(url: str, method: str = "GET") -> dict:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def setup_django(postgres: bool) -> None:
    var = tempfile.mkdtemp(prefix="assay-bench-runner-")
    os.environ.update(
        DEBUG="false",
        SECRET_KEY="bench-only-" + "x" * 40,
        ASSAY_VAR_DIR=var,
        CELERY_TASK_ALWAYS_EAGER="true",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=PG_URL if postgres else f"sqlite:///{var}/bench.sqlite3",
    )
    if postgres:
        subprocess.run(
            ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", "assay_bench_runner"],
            check=True,
        )
        subprocess.run(
            ["createdb", "-h", "127.0.0.1", "-U", "postgres", "assay_bench_runner"], check=True
        )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_suite():
    from evals.models import Case, Suite

    suite = Suite.objects.create(name="bench-runner")
    Case.objects.bulk_create(
        Case(
            suite=suite,
            key=f"c{i + 1:05d}",
            input=f"Answer the question. [case=c{i + 1:05d} p={0.40 + 0.50 * i / (CASES - 1)!r} "
            f"expect=ANSWER-c{i + 1:05d}]",
            expected=f"ANSWER-c{i + 1:05d}",
            content_hash=f"{i:064d}",
        )
        for i in range(CASES)
    )
    return suite


def measure(suite, base_url: str, admin: str, concurrency: int, chunk: int) -> dict:
    from django.conf import settings

    from evals.models import Grade, Run
    from evals.runner.start import run_start

    settings.ASSAY["TRIAL_CHUNK_SIZE"] = chunk
    http(f"{admin}/admin/reset", "POST")
    target = {
        "kind": "openai",
        "base_url": base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        "concurrency": concurrency,
        "timeout_s": 30.0,
    }
    cpu0, t0 = time.process_time(), time.perf_counter()
    run = run_start(
        suite=suite,
        name=f"c{concurrency}-k{chunk}-{time.time_ns()}",
        target=target,
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=TRIALS,
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    run = Run.objects.get(id=run.id)
    stats = http(f"{admin}/admin/stats")
    n = run.trials_total
    return {
        "concurrency": concurrency,
        "chunk": chunk,
        "status": run.status,
        "trials": n,
        "errored": run.trials_errored,
        "wall_s": round(wall, 3),
        "pct_of_c_over_latency": round(100 * (n / wall) / (concurrency / LATENCY_S), 1),
        "mock_span_s": round(stats["span_s"], 3),
        "max_in_flight": stats["max_inflight"],
        "trials_per_s": round(n / wall, 1),
        "cpu_s_per_1000": round(cpu * 1000 / n, 2),
        "passes": Grade.objects.filter(trial__run=run, grader="exact", passed=True).count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--chunks", default="16,64,256,1000")
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    port = free_port()
    mock = subprocess.Popen(
        [
            sys.executable,
            args.mock,
            "--port",
            str(port),
            "--latency-ms",
            "200",
            "--jitter-ms",
            "0",
            "--seed",
            "1234",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    admin = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                http(f"{admin}/health")
                break
            except OSError:
                time.sleep(0.1)
        setup_django(args.postgres)
        suite = make_suite()
        rows = []
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            for chunk in (int(k) for k in args.chunks.split(",")):
                row = measure(suite, f"{admin}/v1", admin, concurrency, chunk)
                row["database"] = "postgresql" if args.postgres else "sqlite"
                rows.append(row)
                if not args.json:
                    print(
                        f"{row['database']:10} C={concurrency:3} chunk={chunk:5} {row['status']:9} "
                        f"wall {row['wall_s']:6.2f}s  "
                        f"{row['pct_of_c_over_latency']:5.1f}% of C/lat  "
                        f"max in flight {row['max_in_flight']:3}  "
                        f"{row['trials_per_s']:6.1f} trials/s  "
                        f"cpu {row['cpu_s_per_1000']:5.2f}s/1000  "
                        f"passes {row['passes']}/{row['trials']}"
                        f"  errored {row['errored']}",
                        flush=True,
                    )
        if args.json:
            print(json.dumps(rows, indent=2))
    finally:
        mock.terminate()
        mock.wait(timeout=10)
        if args.postgres:
            from django.db import connections

            connections.close_all()
            subprocess.run(
                [
                    "dropdb",
                    "-h",
                    "127.0.0.1",
                    "-U",
                    "postgres",
                    "--if-exists",
                    "assay_bench_runner",
                ],
                check=False,
            )


if __name__ == "__main__":
    main()
