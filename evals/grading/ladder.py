"""The deterministic rungs of the grader ladder: grade ok trials as they are written, one
grade per (trial, grader) through the unique key, so a redelivery never duplicates one;
the judge rung is graded by ``judges.grading``.

Trajectories and final states are read here only when the grader set has an agent grader
(``GraderSpec.reads_agent``: ``state``, ``trajectory``), in one query per batch of trials
(``_agent_data``); no other grader, and no report, loads those columns."""

from __future__ import annotations

from django.db.models import Count, Q

from evals.grading.agent.data import AgentData
from evals.grading.grader_set import GraderSpec
from evals.grading.graders import run_grader
from evals.models import Grade, Trial
from evals.runner.targets import CaseInput


def _case_input(trial: Trial) -> CaseInput:
    case = trial.case
    return CaseInput(
        key=case.key,
        input=case.input,
        expected=case.expected,
        context=list(case.context or []),
        tags=list(case.tags or []),
        attempt=trial.attempt,
        goal_state=case.goal_state,
    )


def _agent_data(trials: list[Trial], specs: list[GraderSpec]) -> dict[int, AgentData]:
    """Trial id -> its trajectory and final state, read from the database in one query (the
    stored, cleaned values), when some spec reads them; else ``{}`` and no query."""
    if not trials or not any(spec.reads_agent for spec in specs):
        return {}
    rows = Trial.objects.filter(id__in=[t.id for t in trials]).values_list(
        "id", "trajectory", "final_state"
    )
    return {tid: AgentData(trajectory=steps, final_state=state) for tid, steps, state in rows}


def _grade_rows(
    trial: Trial, specs: list[GraderSpec], agent: AgentData | None = None
) -> list[Grade]:
    case_input = _case_input(trial)
    rows = []
    for spec in specs:
        result = run_grader(spec, case=case_input, output=trial.output, agent=agent)
        errored = result.status != "ok" or result.passed is None
        rows.append(
            Grade(
                trial=trial,
                grader=spec.key,
                grader_version=str(spec.version),
                status=Grade.Status.ERROR if errored else Grade.Status.OK,
                passed=None if errored else bool(result.passed),
                score=None if errored else result.score,
                reason=result.reason or ("errored" if errored else ""),
                details=result.details or {},
                gating=spec.gating,
            )
        )
    return rows


def grades_record(*, trials: list[Trial], specs: list[GraderSpec]) -> int:
    """Grade ok trials that have just been written (so have no grades yet) with one insert;
    returns the number of grade rows offered.

    Idempotent: the insert goes through the unique (trial, grader) key with
    ``ignore_conflicts``, so a grade that exists already is kept and not duplicated.
    """
    specs = [spec for spec in specs if not spec.is_judge]  # the judge task grades those
    ok = [t for t in trials if t.status == Trial.Status.OK]
    agent = _agent_data(ok, specs)
    rows = [row for t in ok for row in _grade_rows(t, specs, agent.get(t.id))]
    if rows:
        Grade.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def trial_grade(*, trial: Trial, specs: list[GraderSpec]) -> int:
    """Grade one ok trial with ``specs`` and store one Grade per (trial, grader); returns the
    number of grades created.

    Idempotent: graders that already have a grade on this trial are skipped, and the insert
    goes through the unique (trial, grader) key with ``ignore_conflicts``, so a concurrent
    duplicate is dropped by the database. An errored trial gets no grades (it is errored, not
    failed). ``run_grader`` never raises: a grader that breaks gives an errored grade.
    """
    specs = [spec for spec in specs if not spec.is_judge]  # the judge task grades those
    if trial.status != Trial.Status.OK or not specs:
        return 0
    done = set(Grade.objects.filter(trial=trial).values_list("grader", flat=True))
    todo = [spec for spec in specs if spec.key not in done]
    if not todo:
        return 0
    rows = _grade_rows(trial, todo, _agent_data([trial], todo).get(trial.id))
    Grade.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _chunk_grades_complete(*, run_id: int, trial_ids: list[int], specs: list[GraderSpec]) -> None:
    """Grade ok trials of the chunk that miss a grade (a worker died between writing the trial
    and grading it); one query when nothing is missing."""
    specs = [spec for spec in specs if not spec.is_judge]
    if not specs:
        return
    missing = (
        Trial.objects.filter(id__in=trial_ids, run_id=run_id, status=Trial.Status.OK)
        .annotate(n_grades=Count("grades", filter=Q(grades__judge_version__isnull=True)))
        .filter(n_grades__lt=len(specs))
        .select_related("case")
        .defer("trajectory", "final_state")
    )
    for trial in missing:
        trial_grade(trial=trial, specs=specs)
