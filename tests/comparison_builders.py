"""Builders for comparison and gate tests: plain ``RunData`` and database runs from verdicts.

Verdict strings per case: "P" pass, "F" fail, "E" errored gating grade, "X" pipeline error.
"""

from __future__ import annotations

from evals.comparison.run_data import CaseData, GraderInfo, RunData
from evals.models import Case, Grade, Run, Suite
from judges.models import Judge, JudgeVersion
from tests.judge_builders import trust
from tests.report_builders import ERR, add_trial

GRADERS = [{"key": "judge", "kind": "judge"}]


def run_data(
    cases: dict[str, str],
    *,
    tags: dict[str, list[str]] | None = None,
    name: str = "R",
    suite: str = "S",
    kind: str = "regression",
    judge_version: str | None = None,
) -> RunData:
    """Plain ``RunData``: ``cases`` maps key -> verdict string (content hash = "h-<key>")."""
    n = max((len(v) for v in cases.values()), default=1)
    rows = tuple(
        CaseData(
            key=key,
            content_hash=f"h-{key}",
            tags=tuple((tags or {}).get(key, [])),
            verdicts=tuple(c == "P" for c in v if c in "PF"),
            trials=len(v),
            pipeline_errored=v.count("X"),
            grade_errored=v.count("E"),
        )
        for key, v in cases.items()
    )
    graders = (
        GraderInfo(
            "judge",
            True,
            judge_version,
            "judge" if judge_version else None,
            True if judge_version else None,
        ),
    )
    return RunData(
        label=f"{suite} / {name}",
        uuid="",
        name=name,
        suite_name=suite,
        suite_kind=kind,
        status="succeeded",
        trials_per_case=n,
        graders=graders,
        cases=rows,
    )


def judge_version(number: int, *, trusted: bool = True, judge: str = "judge") -> JudgeVersion:
    """Version ``number`` of a rubric judge named ``judge`` (trusted unless told)."""

    j, _ = Judge.objects.get_or_create(name=judge, defaults={"kind": Judge.Kind.RUBRIC})
    version = JudgeVersion.objects.create(
        judge=j, number=number, model=f"m{number}", prompt_template=f"p{number}"
    )
    if trusted:
        trust(version)
    return version


def db_run(
    cases: dict[str, str],
    *,
    name: str,
    suite: str = "S",
    kind: str = "regression",
    version: JudgeVersion | None = None,
    graders: list[dict] | None = None,
    cost: str | None = "0.001",
) -> Run:
    """A succeeded run in the database: each case's input is its key (so runs of one suite
    share cases); grader "judge" gating, graded by ``version`` when given."""
    s, _ = Suite.objects.get_or_create(name=suite, defaults={"kind": kind})
    n = max(len(v) for v in cases.values())
    run = Run.objects.create(
        suite=s,
        name=name,
        target_kind="callable",
        graders=graders or GRADERS,
        trials_per_case=n,
        status=Run.Status.SUCCEEDED,
    )
    for key, verdicts in cases.items():
        Case.objects.get_or_create(
            suite=s, key=key, retired_at=None, defaults={"input": key, "tags": []}
        )
        for attempt, v in enumerate(verdicts, start=1):
            if v == "X":
                add_trial(run, key, attempt, status="error", error="HTTP 500")
                continue
            trial = add_trial(
                run,
                key,
                attempt,
                grades={"judge": ERR if v == "E" else v == "P"},
                cost=cost,
                tokens=(100, 10),
                latency=100.0,
            )
            if version is not None:
                Grade.objects.filter(trial=trial).update(judge_version=version)
    return run
