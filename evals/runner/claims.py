"""Claiming a run's trials for a chunk, and what a claimed trial's call needs.

A claim is a compare-and-set, queued (or running with an expired lease) -> running with a
lease, so nothing is claimed twice. These statements run with every batch on every worker,
so they are raw SQL: compiling them with the ORM was most of a trial's CPU (bench/README.md,
"Worker CPU per trial"). Tests run them on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from core.db import model_field, sql_marks
from evals.grading.ladder import case_input_from
from evals.models import Case, Run, Trial
from evals.runner.targets import CaseInput

QUEUED = Trial.Status.QUEUED.value
RUNNING = Trial.Status.RUNNING.value


def trial_lease() -> timedelta:
    """How long a claim holds a trial before the sweeper may take it back."""
    return timedelta(seconds=settings.ASSAY["TRIAL_LEASE_SECONDS"])


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _when(value: datetime) -> Any:
    """A datetime as the database takes it (SQLite: UTC text, as the ORM writes it)."""
    return Trial._meta.get_field("started_at").get_db_prep_save(value, connection)


def _skip_locked() -> str:
    """`` FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite serialises writers instead."""
    return (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )


def _claim(cursor, ids: list[int], condition: str, condition_params: list, now: datetime) -> None:
    """Running with a new lease, for ``ids`` still meeting ``condition`` (compare-and-set)."""
    cursor.execute(
        f"UPDATE {_q(Trial._meta.db_table)} SET {_q('status')} = %s, "
        f"{_q('lease_expires_at')} = %s, {_q('started_at')} = %s "
        f"WHERE {_q('id')} IN ({sql_marks(ids)}) AND {condition}",
        [RUNNING, _when(now + trial_lease()), _when(now), *ids, *condition_params],
    )


def _run_start(cursor, run_id: int, now: datetime) -> None:
    """The run queued -> running (compare-and-set: a no-op once it runs)."""
    cursor.execute(
        f"UPDATE {_q(Run._meta.db_table)} SET {_q('status')} = %s, {_q('started_at')} = %s "
        f"WHERE {_q('id')} = %s AND {_q('status')} = %s",
        [Run.Status.RUNNING.value, _when(now), run_id, Run.Status.QUEUED.value],
    )


def trials_claim(*, run_id: int, trial_ids: list[int], run_start: bool = True) -> list[int]:
    """Claim ``trial_ids`` of run ``run_id`` (queued, or running with an expired lease); returns
    the ids now held, in order. The ids are read (``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and
    updated under the same condition in one transaction (plus ``run_start``: queued run ->
    running)."""
    if not trial_ids:
        return []
    now = timezone.now()
    claimable = f"({_q('status')} = %s OR ({_q('status')} = %s AND {_q('lease_expires_at')} < %s))"
    claimable_params = [QUEUED, RUNNING, _when(now)]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_q('id')} FROM {_q(Trial._meta.db_table)} "
            f"WHERE {_q('run_id')} = %s AND {_q('id')} IN ({sql_marks(trial_ids)}) AND {claimable}"
            f"{_skip_locked()}",
            [run_id, *trial_ids, *claimable_params],
        )
        claimed = [row[0] for row in cursor.fetchall()]
        if claimed:
            _claim(cursor, claimed, claimable, claimable_params, now)
            if run_start:
                _run_start(cursor, run_id, now)
    order = {trial_id: i for i, trial_id in enumerate(trial_ids)}
    return sorted(claimed, key=order.__getitem__)


def trials_claim_next(*, run_id: int, limit: int, run_start: bool = True) -> list[int]:
    """Claim up to ``limit`` queued trials of ``run_id`` no chunk holds, lowest id first, as
    ``trials_claim``; returns the ids ascending. Their own messages then claim nothing."""
    if limit <= 0:
        return []
    now = timezone.now()
    queued = f"{_q('status')} = %s"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_q('id')} FROM {_q(Trial._meta.db_table)} "
            f"WHERE {_q('run_id')} = %s AND {queued} ORDER BY {_q('id')} LIMIT %s"
            f"{_skip_locked()}",
            [run_id, QUEUED, limit],
        )
        claimed = [row[0] for row in cursor.fetchall()]
        if claimed:
            _claim(cursor, claimed, queued, [QUEUED], now)
            if run_start:
                _run_start(cursor, run_id, now)
    return claimed


def trials_claimable(*, run_id: int, trial_ids: list[int]) -> bool:
    """Whether a chunk of ``trial_ids`` has anything to call (one claimable, or some trial of the
    run queued). One statement on the (run, status) index."""
    sql = (
        f"SELECT 1 FROM {_q(Trial._meta.db_table)} "
        f"WHERE {_q('run_id')} = %s AND ({_q('status')} = %s"
    )
    params: list[Any] = [run_id, QUEUED]
    if trial_ids:
        sql += (
            f" OR ({_q('id')} IN ({sql_marks(trial_ids)}) AND {_q('status')} = %s AND "
            f"{_q('lease_expires_at')} < %s)"
        )
        params += [*trial_ids, RUNNING, _when(timezone.now())]
    with connection.cursor() as cursor:
        cursor.execute(f"{sql}) LIMIT 1", params)
        return cursor.fetchone() is not None


class Held(NamedTuple):
    """A claimed, unwritten trial: what its call and grades need, read once at the claim."""

    case_input: CaseInput
    top_up_id: int | None


_CASE_JSON = ("input", "expected", "context", "tags", "goal_state")


def trials_held(trial_ids: list[int]) -> dict[int, Held]:
    """``Held`` of each of ``trial_ids``: one query joining trial and case, only the columns
    a call and a grade read, JSON decoded by the case's own fields (``from_db_value``)."""
    if not trial_ids:
        return {}
    trial, case = _q(Trial._meta.db_table), _q(Case._meta.db_table)
    case_json = [model_field(Case, name, models.JSONField) for name in _CASE_JSON]
    columns = ", ".join(f"{case}.{_q(field.column)}" for field in case_json)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {trial}.{_q('id')}, {trial}.{_q('attempt')}, {trial}.{_q('top_up_id')}, "
            f"{case}.{_q('key')}, {columns} FROM {trial} "
            f"JOIN {case} ON {case}.{_q('id')} = {trial}.{_q('case_id')} "
            f"WHERE {trial}.{_q('id')} IN ({sql_marks(trial_ids)})",
            trial_ids,
        )
        rows = cursor.fetchall()
    held = {}
    for trial_id, attempt, top_up_id, key, *raw in rows:
        input_, expected, context, tags, goal_state = (
            field.from_db_value(value, field.cached_col, connection)
            for field, value in zip(case_json, raw, strict=True)
        )
        held[trial_id] = Held(
            case_input_from(
                key=key,
                input=input_,
                expected=expected,
                context=context,
                tags=tags,
                attempt=attempt,
                goal_state=goal_state,
            ),
            top_up_id,
        )
    return held


def leases_renew(trial_ids: list[int]) -> None:
    """Push the lease of trials a chunk holds (still running) one lease into the future."""
    Trial.objects.filter(id__in=trial_ids, status=Trial.Status.RUNNING).update(
        lease_expires_at=timezone.now() + trial_lease()
    )


def trials_release(trial_ids: list[int]) -> list[int]:
    """Give back claimed trials not called (running -> queued); returns the ids released."""
    rows = Trial.objects.filter(id__in=trial_ids, status=Trial.Status.RUNNING)
    released = list(rows.values_list("id", flat=True))
    Trial.objects.filter(id__in=released, status=Trial.Status.RUNNING).update(
        status=Trial.Status.QUEUED, lease_expires_at=None, started_at=None
    )
    return released
