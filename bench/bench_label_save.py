"""Benchmark the labeling queue's save endpoint (``labeling:label-save``, htmx) under 20
concurrent reviewers over loopback HTTP, against a real WSGI server.

Usage (SQLite, a throwaway file under /tmp):
    .venv/bin/python bench/bench_label_save.py
PostgreSQL (the database is dropped and re-created):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_label_save \
        .venv/bin/python bench/bench_label_save.py

1. Migrates a fresh database; creates 20 reviewers and a calibration set of 30 trials
   (fabricated run, one recorded judge version's grades).
2. Starts the server (``bench/_server.py``: gunicorn as in the README's Production section;
   ``BENCH_SERVER=waitress`` for one waitress process of ``BENCH_THREADS`` threads).
   Server time is the app's own ``Server-Timing: app;dur=<ms>`` header
   (``config.middleware.ServerTimingMiddleware``: middleware, view, queries, template).
3. 20 reviewer threads (one httpx client each) log in and open the queue (not timed),
   then each saves 30 first labels and 30 revisions through the htmx endpoint, either
   paced like people (``BENCH_PACE=people``, the default: a pause drawn uniformly from
   1–3 s before each save, seeded per reviewer) or back to back (``BENCH_PACE=none``,
   saturation): 1,200 requests, fixed, then the script stops by itself.
   ``BENCH_OVERLAP=k`` (default 0: no assignment, every reviewer sees every item) gives the
   set an assignment (``labeling.assignment``): 30 x 20 / k items, k reviewers each, so each
   reviewer still saves 30 items of their own through a queue filtered by the assignment.
Prints p50 / p95 / max of server time and of the client round trip, in ms, and saves/s.
Target: p95 server time < 40 ms on PostgreSQL.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _server import (
    bench_env,
    database_fresh,
    server_cpu_seconds,
    server_label,
    server_start,
    server_stop,
)

REVIEWERS = int(os.environ.get("BENCH_REVIEWERS", "20"))
ITEMS = 30  # per reviewer: 30 first labels + 30 revisions
PORT = int(os.environ.get("BENCH_PORT", "8765"))
PASSWORD = "bench-password-123"
# "people": a uniform 1-3 s pause before each save; "none": back to back (saturation).
PACE = os.environ.get("BENCH_PACE", "people")
OVERLAP = int(os.environ.get("BENCH_OVERLAP", "0"))


def setup_data() -> tuple[str, list[list[str]]]:
    """Fresh database with the cast and one calibration set; returns its uuid and each
    reviewer's trial uuids."""
    database_fresh()
    from django.contrib.auth.models import Group, User

    from labeling.assignment import assignment_set
    from labeling.models import ItemAssignment
    from tests.labeling_builders import calibration_set, judged_run

    group = Group.objects.get(name="reviewer")
    users = []
    for i in range(REVIEWERS):
        user = User.objects.create_user(f"rev{i:02d}", password=PASSWORD)
        user.groups.add(group)
        users.append(user)
    n_items = ITEMS * REVIEWERS // OVERLAP if OVERLAP else ITEMS
    run, version, trials = judged_run(n_items, judge_fails=10)
    cset = calibration_set(run, version, trials)
    per_reviewer = [[str(t.uuid) for t in trials] for _ in users]
    if OVERLAP:
        lead = User.objects.create_user("lead", password=PASSWORD)
        lead.groups.add(Group.objects.get(name="lead"))
        assignment_set(calibration_set=cset, reviewers=users, overlap=OVERLAP, by=lead, seed=1)
        rows = ItemAssignment.objects.order_by("item__position").values_list(
            "reviewer_id", "item__trial__uuid"
        )
        index = {u.pk: i for i, u in enumerate(users)}
        per_reviewer = [[] for _ in users]
        for reviewer_id, trial_uuid in rows:
            per_reviewer[index[reviewer_id]].append(str(trial_uuid))
    from django.db import connections

    connections.close_all()
    return str(cset.uuid), per_reviewer


def reviewer(
    index: int,
    set_id: str,
    trials: list[str],
    server: list,
    client_ms: list,
    errors: list,
    barrier: threading.Barrier,
) -> None:
    import random

    import httpx

    pause = random.Random(index)
    base = f"http://127.0.0.1:{PORT}"
    with httpx.Client(base_url=base, timeout=30) as http:
        page = http.get("/accounts/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        http.post(
            "/accounts/login/",
            data={
                "username": f"rev{index:02d}",
                "password": PASSWORD,
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": base},
        )
        http.get(f"/calibration-sets/{set_id}/label/")
        csrf = http.cookies["csrftoken"]
        headers = {"HX-Request": "true", "X-CSRFToken": csrf, "Referer": base}
        barrier.wait()
        for round_, (verdict, version) in enumerate([("pass", 0), ("fail", 1)]):
            for trial in trials:
                if PACE == "people":
                    time.sleep(pause.uniform(1.0, 3.0))
                t0 = time.perf_counter()
                r = http.post(
                    f"/calibration-sets/{set_id}/label/save/",
                    headers=headers,
                    data={
                        "trial": trial,
                        "verdict": verdict,
                        "critique": f"round {round_} by {index}",
                        "expected_version": version,
                    },
                )
                client_ms.append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200 or "Not saved" in r.text:
                    errors.append(f"{r.status_code} {trial}")
                timing = re.fullmatch(r"app;dur=([\d.]+)", r.headers.get("Server-Timing", ""))
                server.append(float(timing.group(1)) if timing else float("nan"))


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    env = bench_env("assay-bench-label.sqlite3")
    os.environ.update(env)
    set_id, trials = setup_data()
    child = server_start(PORT, env)
    try:
        server: list[float] = []
        client_ms: list[float] = []
        errors: list[str] = []
        barrier = threading.Barrier(REVIEWERS + 1)
        threads = [
            threading.Thread(
                target=reviewer,
                args=(i, set_id, trials[i], server, client_ms, errors, barrier),
            )
            for i in range(REVIEWERS)
        ]
        for t in threads:
            t.start()
        barrier.wait()
        cpu0 = server_cpu_seconds(child)
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        server_cpu = server_cpu_seconds(child) - cpu0
    finally:
        server_stop(child)
    db = os.environ["DATABASE_URL"].split(":", 1)[0]
    print(
        f"database: {db}; pace {PACE}; overlap {OVERLAP or 'none'}; {server_label()}; "
        f"{len(server)} saves by "
        f"{REVIEWERS} reviewers in {wall:.1f} s "
        f"({len(server) / wall:.0f} saves/s); errors: {len(errors)} {errors[:3]}"
    )
    print(
        f"server time ms: p50 {pct(server, 50):.1f}, p95 {pct(server, 95):.1f}, "
        f"max {max(server):.1f}"
    )
    print(f"server CPU per save: {server_cpu / max(len(server), 1) * 1000:.1f} ms")
    print(f"load average: {os.getloadavg()}")
    print(
        f"round trip ms:  p50 {pct(client_ms, 50):.1f}, p95 {pct(client_ms, 95):.1f}, "
        f"max {max(client_ms):.1f}"
    )


if __name__ == "__main__":
    main()
