"""The deterministic rungs of the grader ladder: grade ok trials as they are written, one grade
per (trial, grader) through the unique key, so a redelivery never duplicates one.

Trajectories and final states are read only when the set has an agent grader
(``GraderSpec.reads_agent``), in one query per batch; nothing else loads those columns."""

from __future__ import annotations

from typing import Any

from django.db import connection, models
from django.db.models.constants import OnConflict
from django.utils import timezone

from core.db import model_field, sql_marks
from evals.grading.agent.data import AgentData
from evals.grading.grader_set import GraderSpec
from evals.grading.graders import run_grader
from evals.models import Grade, Trial
from evals.runner.targets import CaseInput

# The columns ``_grades_insert`` writes, in order (``id`` is the database's; ``judge_version``
# is null: the deterministic rungs have none).
GRADE_FIELDS = (
    "trial",
    "grader",
    "grader_version",
    "status",
    "passed",
    "score",
    "reason",
    "details",
    "gating",
    "created_at",
)


def case_input_from(
    *,
    key: str,
    input: Any,  # noqa: A002 - the case's field name
    expected: Any,
    context: list | None,
    tags: list | None,
    attempt: int,
    goal_state: Any,
) -> CaseInput:
    """What a target and a grader see of a case at one attempt (``CaseInput``), from the
    case's stored fields: the one place the runner's claim and ``_case_input`` build it."""
    return CaseInput(
        key=key,
        input=input,
        expected=expected,
        context=list(context or []),
        tags=list(tags or []),
        attempt=attempt,
        goal_state=goal_state,
    )


def _case_input(trial: Trial) -> CaseInput:
    case = trial.case
    return case_input_from(
        key=case.key,
        input=case.input,
        expected=case.expected,
        context=case.context,
        tags=case.tags,
        attempt=trial.attempt,
        goal_state=case.goal_state,
    )


def _agent_data(trial_ids: list[int], specs: list[GraderSpec]) -> dict[int, AgentData]:
    """Trial id -> its trajectory and final state, read from the database in one query (the
    stored, cleaned values), when some spec reads them; else ``{}`` and no query."""
    if not trial_ids or not any(spec.reads_agent for spec in specs):
        return {}
    rows = Trial.objects.filter(id__in=trial_ids).values_list("id", "trajectory", "final_state")
    return {tid: AgentData(trajectory=steps, final_state=state) for tid, steps, state in rows}


def _grade_values(
    trial_id: int,
    case_input: CaseInput,
    output: str,
    specs: list[GraderSpec],
    agent: AgentData | None = None,
) -> list[tuple]:
    """One ``GRADE_FIELDS`` tuple per spec (without ``created_at``): the deterministic
    verdicts of one ok trial's output (and, for agent graders, its ``agent`` data)."""
    rows = []
    for spec in specs:
        result = run_grader(spec, case=case_input, output=output, agent=agent)
        errored = result.status != "ok" or result.passed is None
        score = None if errored or result.score is None else float(result.score)
        rows.append(
            (
                trial_id,
                spec.key,
                str(spec.version),
                Grade.Status.ERROR.value if errored else Grade.Status.OK.value,
                None if errored else bool(result.passed),
                score,
                result.reason or ("errored" if errored else ""),
                result.details or {},
                spec.gating,
            )
        )
    return rows


def _grades_insert(values: list[tuple]) -> None:
    """One prepared ``INSERT ... ON CONFLICT DO NOTHING`` (``INSERT OR IGNORE`` on SQLite) over
    ``executemany`` rows (the runner's hot path: ``bulk_create`` cost more CPU than the write);
    ``details`` and ``created_at`` adapted by their fields' ``get_db_prep_save``."""
    if not values:
        return
    fields = [model_field(Grade, name, models.Field) for name in GRADE_FIELDS]
    ops, quote = connection.ops, connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    placeholders = sql_marks(fields)
    suffix = ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)
    sql = (
        f"{ops.insert_statement(on_conflict=OnConflict.IGNORE)} {quote(Grade._meta.db_table)} "
        f"({columns}) VALUES ({placeholders}) {suffix}"
    ).rstrip()
    details = Grade._meta.get_field("details")
    created_at = Grade._meta.get_field("created_at").get_db_prep_save(timezone.now(), connection)
    params = [
        (*row[:7], details.get_db_prep_save(row[7], connection), row[8], created_at)
        for row in values
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def grades_insert(*, items: list[tuple[int, CaseInput, str]], specs: list[GraderSpec]) -> int:
    """Grade ok trials just written, ``(trial_id, case_input, output)``, with ``specs`` in one
    insert; returns the grade rows offered. Idempotent through the unique (trial, grader) key."""
    specs = [spec for spec in specs if not spec.is_judge]  # the judge task grades those
    agent = _agent_data([trial_id for trial_id, _, _ in items], specs)
    values = [
        row
        for trial_id, case_input, output in items
        for row in _grade_values(trial_id, case_input, output, specs, agent.get(trial_id))
    ]
    _grades_insert(values)
    return len(values)


def grades_record(*, trials: list[Trial], specs: list[GraderSpec]) -> int:
    """Grade ok trials just written (case loaded) in one idempotent insert; rows offered."""
    items = [(t.id, _case_input(t), t.output) for t in trials if t.status == Trial.Status.OK]
    return grades_insert(items=items, specs=specs)


def trial_grade(*, trial: Trial, specs: list[GraderSpec]) -> int:
    """Grade one ok trial with ``specs``; returns the grades created. Idempotent: existing graders
    are skipped and the insert ignores conflicts. An errored trial gets no grades."""
    specs = [spec for spec in specs if not spec.is_judge]  # the judge task grades those
    if trial.status != Trial.Status.OK or not specs:
        return 0
    done = set(Grade.objects.filter(trial=trial).values_list("grader", flat=True))
    todo = [spec for spec in specs if spec.key not in done]
    if not todo:
        return 0
    agent = _agent_data([trial.id], todo).get(trial.id)
    values = _grade_values(trial.id, _case_input(trial), trial.output, todo, agent)
    _grades_insert(values)
    return len(values)


def _chunk_grades_complete(*, run_id: int, trial_ids: list[int], specs: list[GraderSpec]) -> None:
    """Grade the chunk's ok trials missing a grade (a worker died between write and grade)."""
    specs = [spec for spec in specs if not spec.is_judge]
    if not specs or not trial_ids:
        return
    q = connection.ops.quote_name
    trial, grade = q(Trial._meta.db_table), q(Grade._meta.db_table)
    keys = list(dict.fromkeys(spec.key for spec in specs))
    # By primary key and the (trial, grader) key only: just after a run's start the
    # planner's statistics do not know its trials and grades yet, and a condition on
    # ``run_id`` or ``judge_version`` led it to scan every trial of the run (37 ms for a
    # chunk of 100 of a 10,000-trial run, against 3 ms this way).
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {trial}.{q('id')} FROM {trial} WHERE {trial}.{q('id')} IN "
            f"({sql_marks(trial_ids)}) AND {trial}.{q('status')} = %s AND "
            f"(SELECT COUNT(*) FROM {grade} WHERE {grade}.{q('trial_id')} = {trial}.{q('id')} "
            f"AND {grade}.{q('grader')} IN ({sql_marks(keys)})) < %s",
            [*trial_ids, Trial.Status.OK.value, *keys, len(keys)],
        )
        missing_ids = [row[0] for row in cursor.fetchall()]
    if not missing_ids:
        return
    missing = (
        Trial.objects.filter(id__in=missing_ids, run_id=run_id)
        .select_related("case")
        .defer("trajectory", "final_state")
    )
    for trial_row in missing:
        trial_grade(trial=trial_row, specs=specs)
