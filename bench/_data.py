"""Shared data builders for the benchmarks that read runs (report, comparison page, API
paging): one suite of cases and runs of N trials per case, bulk-created.

A run holds ~2% pipeline errors, ~1% errored grades, ~3% unknown costs and 10 tags; each
case has a pass probability and every grader passes an ok trial with it. Import after
``django.setup()``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from decimal import Decimal

from django.db import connection

from evals.models import Case, Grade, Run, Suite, Trial, content_hash


def suite_build(n_cases: int, *, name: str, kind: str | None = None) -> tuple[Suite, list[Case]]:
    """A suite ``name`` (of ``kind`` when given) with ``n_cases`` cases ``c00000..``, tagged
    ``t0..t9`` round robin; returns the suite and its cases in key order."""
    suite = Suite.objects.create(name=name, **({"kind": kind} if kind else {}))
    cases = Case.objects.bulk_create(
        [
            Case(
                suite=suite,
                key=f"c{i:05d}",
                input=f"q{i}",
                tags=[f"t{i % 10}"],
                content_hash=content_hash(input=f"q{i}", expected=None, context=[]),
            )
            for i in range(n_cases)
        ],
        batch_size=1000,
    )
    return suite, cases


def run_build(
    suite: Suite,
    cases: Sequence[Case],
    *,
    name: str,
    probs: Sequence[float],
    graders: list[dict],
    trials: int,
    rng: random.Random,
    output: Callable[[Case, random.Random], str],
    fail_score: float = 0.0,
    cost_usd: Decimal = Decimal("0.00120000"),
) -> Run:
    """A succeeded run of ``trials`` trials per case of ``cases`` (pass probability
    ``probs[i]`` for case i), graded by every grader of ``graders``; ``output(case, rng)``
    gives each trial's output text; ``cost_usd`` each known trial cost (USD; 3% unknown)."""
    run = Run.objects.create(
        suite=suite,
        name=name,
        target_kind="simulated",
        graders=graders,
        trials_per_case=trials,
        status="succeeded",
    )
    rows = []
    for case, p in zip(cases, probs, strict=True):
        for attempt in range(1, trials + 1):
            error = rng.random() < 0.02
            trial = Trial(
                run=run,
                case=case,
                attempt=attempt,
                status="error" if error else "ok",
                output=output(case, rng),
                input_tokens=500,
                output_tokens=rng.randint(50, 300),
                latency_ms=rng.uniform(200, 3000),
                cost_usd=None if rng.random() < 0.03 else cost_usd,
            )
            trial.p = p
            rows.append(trial)
    Trial.objects.bulk_create(rows, batch_size=1000)
    grades = []
    for trial in rows:
        if trial.status == "error":
            continue
        for g in graders:
            if rng.random() < 0.01:
                grades.append(
                    Grade(
                        trial=trial,
                        grader=g["key"],
                        status="error",
                        passed=None,
                        reason="TimeoutError: oracle",
                    )
                )
            else:
                ok = rng.random() < trial.p
                grades.append(
                    Grade(
                        trial=trial,
                        grader=g["key"],
                        status="ok",
                        passed=ok,
                        score=1.0 if ok else fail_score,
                        reason="ok" if ok else "missing keys: ['policy_id']",
                    )
                )
    Grade.objects.bulk_create(grades, batch_size=2000)
    return run


def analyze() -> None:
    """On PostgreSQL, ANALYZE the bulk-loaded tables (autovacuum would within a minute or
    so) so that the plan, and the figure, do not depend on that timing."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE evals_trial, evals_grade, evals_case")
