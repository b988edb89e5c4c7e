"""Benchmark the run report of an agent run: server time and query count by size.

Usage (SQLite, in a throwaway test database):
    .venv/bin/python bench/bench_agent_report.py
PostgreSQL:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/assay_bench \
        .venv/bin/python bench/bench_agent_report.py

Builds runs of 50 and 200 cases x 5 trials, each trial with a stored trajectory of 30 steps
(tool calls with arguments, tool results of ~400 characters, tokens and cost per model
step) and a final state, graded by a ``state`` grader (outcome, gating) and a
``trajectory`` grader (path, non-gating): ~2% pipeline errors, ~1% errored grades, about a
fifth of the trials where outcome and trajectory disagree, with realistic reasons and group
texts (``bulk_create``). Then times, after one warm-up, the median and min of 9 calls of
``run_report`` (the report with its agent block: outcome, trajectory, the 2 x 2 overall and
per case, disagreements grouped by reason) and of a full GET of the run page through
Django's test client (report plus template), with this process's CPU time, and counts
their queries (CaptureQueriesContext). Server time = in-process wall time: no network.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from core.roles import ROLES  # noqa: E402
from evals.models import Case, Grade, Run, Suite, Trial, content_hash  # noqa: E402
from evals.report.selectors import run_report  # noqa: E402

TRIALS = 5
STEPS = 30
GRADERS = [
    {"key": "outcome", "kind": "state"},
    {
        "key": "path",
        "kind": "trajectory",
        "gating": False,
        "config": {"required": ["lookup_order"], "before": [["lookup_order", "issue_refund"]]},
    },
]
BEFORE = "forbidden tool `issue_refund` before `lookup_order`"
STATE_GROUPS = [
    "different `order.status`",
    "different `refunds[0].amount`",
    "unexpected `escalations`",
]


def trajectory(rng: random.Random) -> list[dict]:
    steps: list[dict] = [{"kind": "message", "role": "user", "content": "Refund my order."}]
    while len(steps) < STEPS:
        name = rng.choice(["lookup_order", "issue_refund", "escalate", "search_kb"])
        steps.append(
            {
                "kind": "tool_call",
                "name": name,
                "arguments": {
                    "order_id": f"A{rng.randint(100, 999)}",
                    "amount": rng.randint(1, 500),
                },
                "input_tokens": rng.randint(200, 900),
                "output_tokens": rng.randint(10, 90),
                "cost_usd": 0.0004,
            }
        )
        steps.append({"kind": "tool_result", "name": name, "content": "r" * 400, "status": "ok"})
    return steps[:STEPS]


def build(n_cases: int, rng: random.Random) -> Run:
    suite = Suite.objects.create(name=f"agent-bench-{n_cases}")
    goal = {"order": {"status": "refunded"}, "refunds": [{"amount": 30}]}
    cases = Case.objects.bulk_create(
        [
            Case(
                suite=suite,
                key=f"c{i:05d}",
                input=f"q{i}",
                tags=[f"t{i % 10}"],
                goal_state=goal,
                content_hash=content_hash(
                    input=f"q{i}", expected=None, context=[], goal_state=goal
                ),
            )
            for i in range(n_cases)
        ],
        batch_size=500,
    )
    run = Run.objects.create(
        suite=suite,
        name="bench",
        target_kind="callable",
        graders=GRADERS,
        trials_per_case=TRIALS,
        status="succeeded",
    )
    trials = []
    for case in cases:
        p = rng.uniform(0.4, 0.95)
        for attempt in range(1, TRIALS + 1):
            error = rng.random() < 0.02
            trials.append(
                Trial(
                    run=run,
                    case=case,
                    attempt=attempt,
                    status="error" if error else "ok",
                    output="Refunded.",
                    input_tokens=8000,
                    output_tokens=rng.randint(300, 900),
                    latency_ms=rng.uniform(2000, 9000),
                    cost_usd=Decimal("0.00600000"),
                    trajectory=trajectory(rng),
                    final_state=goal,
                )
            )
            trials[-1].p = p
    Trial.objects.bulk_create(trials, batch_size=200)
    grades = []
    for trial in trials:
        if trial.status == "error":
            continue
        outcome = rng.random() < trial.p
        path = outcome if rng.random() < 0.8 else not outcome
        for key, passed in (("outcome", outcome), ("path", path)):
            if rng.random() < 0.01:
                grades.append(
                    Grade(
                        trial=trial,
                        grader=key,
                        status="error",
                        passed=None,
                        reason="no final state",
                    )
                )
                continue
            group = BEFORE if key == "path" else rng.choice(STATE_GROUPS)
            grades.append(
                Grade(
                    trial=trial,
                    grader=key,
                    gating=key == "outcome",
                    status="ok",
                    passed=passed,
                    score=float(passed),
                    reason="ok" if passed else f"{group} (step {rng.randint(2, 29)})",
                    details={} if passed else {"group": group},
                )
            )
    Grade.objects.bulk_create(grades, batch_size=2000)
    return run


def _time(call, repeats: int = 9) -> tuple[float, float, float, int]:
    """(median wall ms, min wall ms, median process CPU ms, query count) of ``call``."""
    call()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        call()
    return statistics.median(wall), min(wall), statistics.median(cpu), len(ctx.captured_queries)


def main() -> None:
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        for role in ROLES:
            Group.objects.get_or_create(name=role)
        user = User.objects.create_user(username="bench", password="x")
        user.groups.set(Group.objects.all())
        client = Client()
        client.force_login(user)
        rng = random.Random(20261202)
        print(f"database: {connection.vendor}; load average {os.getloadavg()}")
        for n_cases in (50, 200):
            run = build(n_cases, rng)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("ANALYZE evals_trial, evals_grade, evals_case")
            run = Run.objects.select_related("suite").get(pk=run.pk)
            report = run_report(run=run).agents
            assert report is not None and report["disagreements"] > 0
            url = reverse("evals:run-detail", kwargs={"run_id": run.uuid})

            def page(url=url) -> None:
                response = client.get(url)
                assert response.status_code == 200, (response.status_code, response.content[:300])

            r = _time(lambda run=run: run_report(run=run))
            p = _time(page)
            stored = sum(
                len(json.dumps(t)) for t in Trial.objects.values_list("trajectory", flat=True)[:50]
            )
            print(
                f"{n_cases} cases x {TRIALS} trials x {STEPS} steps "
                f"(~{stored // 50} bytes of trajectory per trial; "
                f"{report['disagreements']} disagreements in {len(report['groups'])} groups): "
                f"run_report median {r[0]:.0f} ms (min {r[1]:.0f}, CPU {r[2]:.0f}), "
                f"{r[3]} queries; run page median {p[0]:.0f} ms (min {p[1]:.0f}, "
                f"CPU {p[2]:.0f}), {p[3]} queries"
            )
        print(f"load average after: {os.getloadavg()}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
