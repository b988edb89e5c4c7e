"""Benchmark: import a ~100 MB labeled-records JSONL file; peak memory and records/s.

Usage (from the project folder):
    .venv/bin/python bench/bench_import.py [--mb 100] [--database-url URL]

Django's DEBUG is off in the child (as in production; BENCH_DEBUG=true turns it on, and
then Django's own query log holds every bulk INSERT). Each measurement runs in a fresh
subprocess: peak RSS = ru_maxrss (KiB on Linux) after the import minus ru_maxrss after
Django setup and migrations (the baseline). Target: peak under 300 MB. Without
``--database-url`` it measures a temporary SQLite file and, when a local PostgreSQL
answers, ``postgres://postgres@127.0.0.1:5432/assay_bench_import``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = [
    "policy",
    "claim",
    "expense",
    "receipt",
    "travel",
    "meal",
    "hotel",
    "approve",
    "reject",
    "limit",
    "manager",
    "invoice",
    "currency",
    "total",
    "amount",
    "date",
    "vendor",
    "report",
    "summary",
]


def make_file(path: Path, megabytes: int) -> int:
    """Write synthetic pointwise records (outputs of 2-6 KB, 3 judges) until ``megabytes``."""
    rng = random.Random(7)
    target = megabytes * 1024 * 1024
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        while fh.tell() < target:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(300, 900)))
            rec = {
                "id": f"bench:{n:07d}",
                "dataset": "bench",
                "split": "test",
                "task_type": "pointwise_binary",
                "category": f"cat{n % 5}",
                "tags": ["bench"],
                "input": f"question {n}: " + " ".join(rng.choice(WORDS) for _ in range(20)),
                "context": [],
                "responses": [{"response_id": "R", "model": "m", "text": text}],
                "human_label": {
                    "type": "pass_fail",
                    "value": rng.choice(["pass", "fail"]),
                    "method": "synthetic",
                    "details": {},
                },
                "human_annotations": [],
                "judge_labels": [
                    {
                        "judge_model": f"j{j}",
                        "judge_type": "llm",
                        "protocol": "p",
                        "position": None,
                        "value": rng.choice(["pass", "fail", None]),
                        "score": rng.randint(0, 9),
                        "rationale": None,
                    }
                    for j in range(3)
                ],
                "source": {
                    "repo": None,
                    "commit": None,
                    "path": None,
                    "index": n,
                    "original_id": None,
                    "license": None,
                },
            }
            fh.write(json.dumps(rec) + "\n")
            n += 1
    return n


CHILD = r"""
import json, os, resource, sys, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
django.setup()
from django.conf import settings
# Production runs with DEBUG off; with DEBUG on, Django keeps every SQL statement (up to
# 9,000, bulk inserts included) in connection.queries, which is not the importer's memory.
settings.DEBUG = os.environ.get("BENCH_DEBUG") == "true"
from django.core.management import call_command
call_command("migrate", verbosity=0)
from interop.importers import results_import
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    s = results_import(stream=fh, filename="bench.jsonl", suite_name="bench-" + str(time.time()),
                       run_name="r")
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"records": s.trials, "seconds": dt, "baseline_mb": base / 1024,
                  "peak_mb": peak / 1024, "delta_mb": (peak - base) / 1024}))
"""


def measure(path: Path, database_url: str) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def postgres_ready(url: str) -> bool:
    try:
        import psycopg

        admin = url.rsplit("/", 1)[0] + "/postgres"
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return True
    except Exception as exc:  # no server: skip that row, say so
        print(f"PostgreSQL not measured: {exc}", file=sys.stderr)
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="assay-bench-import-") as tmp:
        path = Path(tmp) / "bench.jsonl"
        t0 = time.perf_counter()
        n = make_file(path, args.mb)
        size = path.stat().st_size / 1024 / 1024
        print(f"generated {n} records, {size:.1f} MB in {time.perf_counter() - t0:.1f} s")
        targets = []
        if args.database_url:
            targets.append(("given", args.database_url))
        else:
            targets.append(("SQLite", f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"))
            pg = "postgres://postgres@127.0.0.1:5432/assay_bench_import"
            if postgres_ready(pg):
                targets.append(("PostgreSQL", pg))
        print("| database | records | file MB | seconds | records/s | peak RSS over baseline MB |")
        print("| --- | --- | --- | --- | --- | --- |")
        for label, url in targets:
            r = measure(path, url)
            print(
                f"| {label} | {r['records']} | {size:.1f} | {r['seconds']:.1f} | "
                f"{r['records'] / r['seconds']:.0f} | {r['delta_mb']:.0f} "
                f"(baseline {r['baseline_mb']:.0f}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
