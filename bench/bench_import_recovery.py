"""Benchmark: how long after ``kill -9`` of the worker importing a background upload is the
import done?

Default settings (``ASSAY_TRIAL_LEASE_SECONDS`` 60, the imports' lease too;
``ASSAY_SWEEP_SECONDS`` 30, the import sweep's interval under Celery beat), Redis and
PostgreSQL, two Celery workers (``--pool solo``) and Celery beat. One upload of ``--rows``
CSV rows is queued as an import job (``interop.import_jobs``); once the first worker is
importing it and has read part of the file, its process group gets SIGKILL (no warm
shutdown). Reported: seconds from the kill to the job's end, seconds from the kill to the
second worker's claim of it (after the sweep queued it again), its status, and the rows
written (suites, runs and trials: one of each per import, every row once).

Usage: .venv/bin/python bench/bench_import_recovery.py [--repeat 2] [--rows 100000]
       [--redis redis://127.0.0.1:6379/1] [--database assay_bench_import_recovery]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _cluster import Workers, database_fresh, environment, load_average


def _csv(rows: int) -> bytes:
    lines = ["case_id,input,output,passed"]
    lines += [f"c{i},question {i},answer {i},{'true' if i % 3 else 'false'}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def recover_once(cluster: Workers, rows: int, n: int) -> dict:
    from django.conf import settings
    from django.core.cache import caches
    from django.core.files.uploadedfile import SimpleUploadedFile

    from evals.models import Run, Suite, Trial
    from interop.import_jobs import _progress_key, import_job_create
    from interop.models import ImportJob

    data = _csv(rows)
    victim = cluster.worker(2 * n)
    suite_name = f"import-recovery-{time.time_ns()}"
    job = import_job_create(
        upload=SimpleUploadedFile("big.csv", data),
        options={"suite": suite_name, "run": "R", "format": "", "mapping": {}},
        user=None,
    )
    while True:
        job.refresh_from_db()
        read = caches["progress"].get(_progress_key(job)) or 0
        if job.status == ImportJob.Status.RUNNING and 0 < read < len(data):
            break
        if job.is_terminal:
            raise RuntimeError(f"the import ended before the kill: {job.status}; more --rows")
        time.sleep(0.05)
    claimed_at = job.started_at
    survivor = cluster.worker(2 * n + 1)
    cluster.kill(victim)
    killed = time.perf_counter()
    retaken = None
    while True:
        job.refresh_from_db()
        if retaken is None and job.started_at not in (None, claimed_at):
            retaken = time.perf_counter() - killed  # the survivor's claim
        if job.is_terminal:
            break
        time.sleep(0.1)
    recovery = time.perf_counter() - killed
    suite = Suite.objects.filter(name=suite_name).first()
    row = {
        "lease_s": settings.ASSAY["TRIAL_LEASE_SECONDS"],
        "sweep_s": settings.ASSAY["SWEEP_SECONDS"],
        "rows": rows,
        "bytes": len(data),
        "read_at_kill": read,
        "recovery_s": round(recovery, 1),
        "retaken_s": None if retaken is None else round(retaken, 1),
        "status": job.status,
        "suites": Suite.objects.filter(name=suite_name).count(),
        "runs": Run.objects.filter(suite=suite).count() if suite else 0,
        "trials": Trial.objects.filter(run__suite=suite).count() if suite else 0,
        "load": load_average(),
    }
    cluster.kill(survivor)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--database", default="assay_bench_import_recovery")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    env = environment(args.database, args.redis)
    database_fresh(args.database)
    from config.celery import app

    app.control.purge()
    log_dir = Path(tempfile.mkdtemp(prefix="assay-bench-import-recovery-"))
    cluster = Workers(env, "celery", log_dir)
    rows = []
    try:
        cluster.beat()
        for n in range(args.repeat):
            row = recover_once(cluster, args.rows, n)
            rows.append(row)
            if not args.json:
                print(
                    f"lease {row['lease_s']}s sweep {row['sweep_s']}s: import {row['status']} "
                    f"{row['recovery_s']}s after kill -9 (claimed by the second worker after "
                    f"{row['retaken_s']}s); {row['read_at_kill']} of {row['bytes']} bytes "
                    f"read at the kill; suites {row['suites']} runs {row['runs']} trials "
                    f"{row['trials']} of {row['rows']} rows; load {row['load']}",
                    flush=True,
                )
        if args.json:
            print(json.dumps(rows, indent=2))
    finally:
        cluster.stop_all()


if __name__ == "__main__":
    main()
