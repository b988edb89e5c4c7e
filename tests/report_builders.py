"""Builders for run-report tests: a suite, a run and trials with grades, written directly."""

from __future__ import annotations

from decimal import Decimal

from evals.models import Case, Grade, Run, Suite, Trial

ERR = object()  # an errored grade
NJ = object()  # a "not judged" grade (a rung the ladder skipped)


def make_run(
    *,
    cases: list[tuple[str, list[str]]],
    graders: list[dict],
    n: int = 1,
    name: str = "R1",
    suite: str = "S",
    target_kind: str = "callable",
) -> Run:
    """A run over new cases ``[(key, tags)]`` with grader set ``graders`` and N = ``n``."""
    s, _ = Suite.objects.get_or_create(name=suite)
    for key, tags in cases:
        Case.objects.get_or_create(suite=s, key=key, defaults={"input": key, "tags": tags})
    return Run.objects.create(
        suite=s,
        name=name,
        target_kind=target_kind,
        graders=graders,
        trials_per_case=n,
        status=Run.Status.SUCCEEDED,
    )


def add_trial(
    run: Run,
    key: str,
    attempt: int,
    *,
    status: str = "ok",
    grades: dict | None = None,
    cost: str | None = None,
    tokens=(None, None),
    latency: float | None = None,
    error: str = "",
) -> Trial:
    """One trial; ``grades`` maps grader key -> True/False/ERR/NJ (not judged), or ->
    (verdict, score, reason)."""
    case = Case.objects.get(suite=run.suite, key=key)
    trial = Trial.objects.create(
        run=run,
        case=case,
        attempt=attempt,
        status=status,
        output="x" * 10,
        cost_usd=Decimal(cost) if cost is not None else None,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        latency_ms=latency,
        error_message=error,
    )
    gating = {g["key"]: g.get("gating", True) for g in run.graders}
    for grader, value in (grades or {}).items():
        verdict, score, reason = value if isinstance(value, tuple) else (value, None, "")
        errored = verdict is ERR
        if verdict is NJ:
            Grade.objects.create(
                trial=trial,
                grader=grader,
                gating=gating.get(grader, True),
                status="not_judged",
                passed=None,
                reason=reason or "not judged: deterministic grader 'a' already failed this trial",
                details={"decided_by": "a", "skipped": True},
            )
            continue
        Grade.objects.create(
            trial=trial,
            grader=grader,
            gating=gating.get(grader, True),
            status="error" if errored else "ok",
            passed=None if errored else verdict,
            score=None if errored else (score if score is not None else float(verdict)),
            reason=reason or ("unparseable" if errored else ("ok" if verdict else "wrong")),
        )
    return trial


def mixed_run() -> Run:
    """3 cases x N=2, gating graders a and b, non-gating c (expected values in the tests).

    c1 [x]:    t1 a P, b P, c F -> P;  t2 a P, b F -> F
    c2 [x, y]: t1 a E, b P -> errored; t2 pipeline error
    c3 [y]:    t1 a F, b E -> F;       t2 a P, b P -> P
    """
    run = make_run(
        cases=[("c1", ["x"]), ("c2", ["x", "y"]), ("c3", ["y"])],
        n=2,
        graders=[
            {"key": "a", "kind": "exact"},
            {"key": "b", "kind": "json_schema"},
            {"key": "c", "kind": "contains", "gating": False},
        ],
    )
    miss = (False, 0.5, "missing keys: ['policy_id']")
    add_trial(
        run,
        "c1",
        1,
        grades={"a": True, "b": True, "c": False},
        cost="0.01",
        tokens=(100, 10),
        latency=100,
    )
    add_trial(
        run, "c1", 2, grades={"a": True, "b": miss}, cost="0.02", tokens=(100, 10), latency=200
    )
    add_trial(
        run, "c2", 1, grades={"a": ERR, "b": True}, cost="0.03", tokens=(100, None), latency=300
    )
    add_trial(run, "c2", 2, status="error", error="HTTP 500: upstream", latency=400)
    add_trial(
        run, "c3", 1, grades={"a": False, "b": ERR}, cost="0.04", tokens=(100, 10), latency=500
    )
    add_trial(run, "c3", 2, grades={"a": True, "b": True}, tokens=(100, 10))
    return run
