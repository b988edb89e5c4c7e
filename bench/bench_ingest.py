"""Benchmark: bulk ingest of 50,000 trials through ``POST /api/ingest``; trials/s and memory.

Usage (from the project folder):
    .venv/bin/python bench/bench_ingest.py [--cases 10000] [--attempts 5]
        [--format ndjson|json|both] [--via http|client] [--database-url URL]
        [--only sqlite|postgresql] [--profile]

``--profile`` prints cProfile's top 40 (``BENCH_SORT``, ``BENCH_TOP``) to stderr; use it
with ``--via client`` (waitress runs the view in another thread, which cProfile misses).

What is measured: one request carrying 10,000 cases x 5 attempts = 50,000 trial records
(input ~100 chars, output ~300 chars, passed, reason, model, tokens, latency, cost, one tag),
each becoming a trial with one grade; validation, cases, trials, grades and the run's
finish all included. Each measurement runs in a fresh subprocess on a fresh database:
Django (``DEBUG=false`` in its environment, as in production, with ``ALLOWED_HOSTS`` naming
127.0.0.1 and no HTTPS redirect) is set up, migrated, a lead and a bearer token are
created, then the body is posted
- ``--via http`` (default): to waitress serving the project on 127.0.0.1 (an ephemeral
  port), from ``http.client`` streaming the body from a file;
- ``--via client``: through Django's test client (no socket).
trials/s = 50,000 / wall time of the request (client side); Python CPU s = CPU time of the
benchmark process during it (server and client; PostgreSQL's own work is not in it). Peak
memory = ``ru_maxrss`` after the request minus ``ru_maxrss`` just before it, after a warm-up
that imports the URL conf and views (server and client share the process; the client
streams from a file). Without ``--database-url`` it measures a temporary SQLite file and,
when a local PostgreSQL answers, ``postgres://postgres@127.0.0.1:5432/assay_bench_ingest``
(dropped and created per run; ``--postgres-url`` names another).
Targets: at least 5,000 trials/s on PostgreSQL; at least 15,000, i.e.
at most ~2 CPU-s of the request's Python per 50,000 trials on the 2-core machine.
NDJSON only by default: one JSON document is now refused past 1 MiB (a 413 saying to send
NDJSON, docs/limits.md), so the JSON figures below in bench/README.md are history.
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
PG_URL = "postgres://postgres@127.0.0.1:5432/assay_bench_ingest"
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


def _text(rng: random.Random, chars: int) -> str:
    out, n = [], 0
    while n < chars:
        word = rng.choice(WORDS)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:chars]


def make_records(cases: int, attempts: int):
    """Yield the trial records (deterministic: seed 7)."""
    rng = random.Random(7)
    for c in range(cases):
        question = f"question {c}: " + _text(rng, 90)
        for a in range(1, attempts + 1):
            passed = rng.random() < 0.7
            yield {
                "case_id": f"case-{c:05d}",
                "input": question,
                "expected": f"answer {c}",
                "tags": [f"t{c % 10}"],
                "attempt": a,
                "output": _text(rng, 300),
                "passed": passed,
                "reason": "matches the reference" if passed else "missing key policy_id",
                "model": "bench-model-1",
                "input_tokens": rng.randint(50, 400),
                "output_tokens": rng.randint(20, 200),
                "latency_ms": round(rng.uniform(100, 3000), 1),
                "cost_usd": f"{rng.uniform(0, 0.01):.8f}",
            }


def make_bodies(folder: Path, cases: int, attempts: int) -> dict[str, Path]:
    head = {
        "suite": "bench-ingest",
        "run": "r1",
        "model": "bench-model-1",
        "source_version": "bench",
        "suite_kind": "regression",
    }
    nd, js = folder / "body.ndjson", folder / "body.json"
    with nd.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(head) + "\n")
        for rec in make_records(cases, attempts):
            fh.write(json.dumps(rec) + "\n")
    with js.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(head)[:-1] + ', "trials": [')
        for i, rec in enumerate(make_records(cases, attempts)):
            fh.write(("," if i else "") + json.dumps(rec))
        fh.write("]}")
    return {"ndjson": nd, "json": js}


CHILD = r"""
import cProfile, http.client, io, json, os, pstats, resource, sys, threading, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
django.setup()
from django.contrib.auth.models import Group, User
from django.core.management import call_command
call_command("migrate", verbosity=0)
from apitokens.tokens import token_create
from evals.models import Grade, Run, Trial

path, media, via, profile = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
user = User.objects.create_user("lead", password="x")
user.groups.add(Group.objects.get(name="lead"))
_, token = token_create(user=user, name="bench")
size = os.path.getsize(path)
headers = {"Authorization": f"Bearer {token}", "Content-Type": media,
           "Content-Length": str(size)}

if via == "http":
    from waitress.server import create_server
    from config.wsgi import application
    server = create_server(application, host="127.0.0.1", port=0, threads=2)
    threading.Thread(target=server.run, daemon=True).start()

    def post():
        conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=600)
        with open(path, "rb") as fh:
            conn.request("POST", "/api/ingest", body=fh, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
else:
    from django.test import Client
    data = open(path, "rb").read()

    def post():
        resp = Client().generic("POST", "/api/ingest", data, content_type=media,
                                HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")
        return resp.status_code, resp.content

from django.urls import resolve
resolve("/api/ingest")  # warm up: import the URL conf and views, as a running server has
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
prof = cProfile.Profile() if profile else None
cpu0 = time.process_time()
t0 = time.perf_counter()
if prof:
    prof.enable()
status, body = post()
if prof:
    prof.disable()
dt = time.perf_counter() - t0
cpu = time.process_time() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert status == 201, (status, body[:500])
out = json.loads(body)
run = Run.objects.get(uuid=out["run"])
assert Trial.objects.filter(run=run).count() == out["counts"]["trials"]
assert Grade.objects.filter(trial__run=run).count() == out["counts"]["grades"]
if prof:
    stats = pstats.Stats(prof, stream=sys.stderr)
    stats.sort_stats(os.environ.get("BENCH_SORT", "cumulative"))
    stats.print_stats(int(os.environ.get("BENCH_TOP", "40")))
print(json.dumps({"trials": out["counts"]["trials"], "grades": out["counts"]["grades"],
                  "cases": out["counts"]["cases"], "seconds": dt, "cpu": cpu, "mb": size / 1048576,
                  "baseline_mb": base / 1024, "delta_mb": (peak - base) / 1024}))
"""


def measure(path: Path, media: str, database_url: str, via: str, profile: bool) -> dict:
    # Production's settings (DEBUG off), served on 127.0.0.1 over plain HTTP: the host names
    # the server answers for, no HTTPS redirect (as bench/_server.py's bench_env).
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PYTHONPATH": str(ROOT),
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        "SECURE_HSTS_SECONDS": "0",
    }
    env.setdefault("SECRET_KEY", "bench-only-" + "x" * 40)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), media, via, "1" if profile else "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if profile or out.returncode:
        print(out.stderr, file=sys.stderr)
    out.check_returncode()
    return json.loads(out.stdout.strip().splitlines()[-1])


def postgres_fresh(url: str) -> bool:
    """Drop and create the benchmark database; False (and a note) when no server answers."""
    try:
        import psycopg

        admin, name = url.rsplit("/", 1)[0] + "/postgres", url.rsplit("/", 1)[1]
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return True
    except Exception as exc:  # no server: skip that row, say so
        print(f"PostgreSQL not measured: {exc}", file=sys.stderr)
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--attempts", type=int, default=5)
    # One JSON document is refused past 1 MiB (core.bounds.BODY_MAX_BYTES["ingest_json"]):
    # --format json measures only a body that small (--cases 500 --attempts 2 or so).
    parser.add_argument("--format", choices=["ndjson", "json", "both"], default="ndjson")
    parser.add_argument("--via", choices=["http", "client"], default="http")
    parser.add_argument("--database-url", default=None)
    parser.add_argument(
        "--postgres-url", default=PG_URL, help="database dropped and created for each row"
    )
    parser.add_argument("--only", choices=["sqlite", "postgresql"], default=None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    formats = ["ndjson", "json"] if args.format == "both" else [args.format]
    media = {"ndjson": "application/x-ndjson", "json": "application/json"}
    with tempfile.TemporaryDirectory(prefix="assay-bench-ingest-") as tmp:
        t0 = time.perf_counter()
        bodies = make_bodies(Path(tmp), args.cases, args.attempts)
        print(
            f"generated {args.cases * args.attempts:,} trial records in "
            f"{time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        print(
            "| database | body | via | trials | MB | seconds | trials/s | Python CPU s | "
            "peak RSS over baseline MB |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
        for fmt in formats:
            targets = []
            if args.database_url:
                targets.append(("given", lambda: args.database_url))
            else:
                if args.only in (None, "sqlite"):
                    targets.append(
                        ("SQLite", lambda: f"sqlite:///{tmp}/bench-{time.time_ns()}.sqlite3")
                    )
                if args.only in (None, "postgresql"):
                    targets.append(
                        (
                            "PostgreSQL",
                            lambda: (
                                args.postgres_url if postgres_fresh(args.postgres_url) else None
                            ),
                        )
                    )
            for label, url_of in targets:
                url = url_of()
                if url is None:
                    continue
                r = measure(bodies[fmt], media[fmt], url, args.via, args.profile)
                print(
                    f"| {label} | {fmt} | {args.via} | {r['trials']:,} | {r['mb']:.1f} | "
                    f"{r['seconds']:.2f} | {r['trials'] / r['seconds']:,.0f} | "
                    f"{r['cpu']:.2f} | "
                    f"{r['delta_mb']:.0f} (baseline {r['baseline_mb']:.0f}) |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
