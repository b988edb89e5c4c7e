"""Benchmark ``labeling.labels.label_submit`` under 20 concurrent reviewers, and
``calibration_compute`` on the real llmbar_pointwise file (602 trials).

Usage (PostgreSQL; SQLite serialises writers, so its figure is not the target's):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench_labels \
        .venv/bin/python bench/bench_label_submit.py

Bounded load: 20 reviewer threads (own DB connection each) label the same 30 trials of a
calibration set, each label then revised once (60 saves per reviewer, 1,200 in all), every
save timed around the service call (the server work of the queue's save, without the view
and template). Prints p50 / p95 / max in ms, after
the same 60 saves by one reviewer alone (the uncontended baseline). The threads share
one Python process (GIL) on the 2-core machine, so the concurrent figure includes waiting
for the interpreter, a pessimistic stand-in for 20 reviewers hitting the server at once.
Then times calibration_compute for the five recorded judges of llmbar_pointwise (median
of 5).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection, connections  # noqa: E402

from evals.models import Run, Trial  # noqa: E402
from interop.importers import results_import  # noqa: E402
from judges.models import JudgeVersion  # noqa: E402
from labeling.calibration_sets import calibration_set_build  # noqa: E402
from labeling.labels import label_submit  # noqa: E402
from labeling.selectors import calibration_compute  # noqa: E402

REVIEWERS = 20
DATA = Path(
    os.environ.get("ASSAY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def _reviewer_loop(user: User, trials: list[Trial], out: list[float]) -> None:
    try:
        for t in trials:
            start = time.perf_counter()
            label_submit(trial=t, reviewer=user, verdict="pass", critique="ok", expected_version=0)
            out.append((time.perf_counter() - start) * 1000)
        for t in trials:
            start = time.perf_counter()
            label_submit(
                trial=t, reviewer=user, verdict="fail", critique="on reflection", expected_version=1
            )
            out.append((time.perf_counter() - start) * 1000)
    finally:
        connections.close_all()


def main() -> None:
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    path = DATA / "llmbar_pointwise" / "llmbar_pointwise.shared.jsonl"
    with path.open("rb") as fh:
        results_import(stream=fh, filename=path.name, suite_name="llmbar", run_name="shared")
    reviewer = Group.objects.get(name="reviewer")
    engineer = User.objects.create_user("eng")
    engineer.groups.add(Group.objects.get(name="engineer"))
    version = JudgeVersion.objects.get(
        model="gpt-4", protocol="LLMBar/Rating_Metrics_Reference (0-9, pass>=5)"
    )
    run = Run.objects.get(name="shared")
    cset = calibration_set_build(run=run, judge_version=version, size=30, name="bench", by=engineer)
    trials = [i.trial for i in cset.items.select_related("trial")]
    users = []
    for i in range(REVIEWERS):
        u = User.objects.create_user(f"r{i}")
        u.groups.add(reviewer)
        users.append(u)
    solo: list[float] = []
    solo_user = User.objects.create_user("solo")
    solo_user.groups.add(reviewer)
    _reviewer_loop(solo_user, trials, solo)
    solo.sort()
    print(
        f"label_submit, 1 reviewer alone, {len(solo)} saves ({connection.vendor}): "
        f"p50 {statistics.median(solo):.1f} ms, p95 {solo[int(0.95 * len(solo)) - 1]:.1f} ms"
    )
    times: list[list[float]] = [[] for _ in users]
    threads = [
        threading.Thread(target=_reviewer_loop, args=(u, trials, times[i]))
        for i, u in enumerate(users)
    ]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - start
    flat = sorted(x for t in times for x in t)
    p95 = flat[int(0.95 * len(flat)) - 1]
    print(
        f"label_submit, {REVIEWERS} concurrent reviewers, {len(flat)} saves "
        f"({connection.vendor}): p50 {statistics.median(flat):.1f} ms, p95 {p95:.1f} ms, "
        f"max {flat[-1]:.1f} ms, wall {wall:.1f} s"
    )
    for version in JudgeVersion.objects.all():
        runs = []
        for _ in range(5):
            s = time.perf_counter()
            cal = calibration_compute(judge_version=version)
            runs.append((time.perf_counter() - s) * 1000)
        print(f"calibration_compute {version}: n {cal.n}, median {statistics.median(runs):.0f} ms")
    connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


if __name__ == "__main__":
    main()
