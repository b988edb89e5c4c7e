"""The sweeper: takes back work a dead worker left behind, without waiting for the broker.

A chunk task is ``acks_late``, so the broker redelivers it when its worker dies, but only
after the broker's own timeout (Redis: the visibility timeout, one hour). Meanwhile its
trials sit ``running`` with a lease that has run out. ``runs_sweep`` (a Celery beat task
every ``ASSAY["SWEEP_SECONDS"]``, or ``manage.py runs_sweep`` from cron) finds them and
enqueues their chunks again. Re-enqueueing is safe: a chunk claims only trials that are
queued or whose lease expired (compare-and-set), so a trial is never called twice at once,
and grades go through the unique (trial, grader) key (fault F1).

It also finds runs stuck on their judge rung: every trial finished, some ok trial still
lacks a judge grade, and nothing was written for a whole lease. Their judge chunks are
enqueued again; the judge service skips trials already judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from core.chunks import chunked
from evals.models import Grade, Run, Trial
from evals.runner.execute import _judge_chunk_enqueue
from evals.runner.finalize import _judge_grading_pending
from evals.runner.start import _chunk_enqueue, trial_chunk_size


@dataclass(frozen=True)
class SweepResult:
    """What one sweep enqueued: ``trials`` with an expired lease in ``chunks`` chunk tasks
    over ``runs`` runs, and ``judge_chunks`` judge chunk tasks over ``judge_runs`` runs."""

    runs: int = 0
    trials: int = 0
    chunks: int = 0
    judge_runs: int = 0
    judge_chunks: int = 0


def runs_sweep(*, now: datetime | None = None) -> SweepResult:
    """Enqueue again the chunks of trials whose lease expired on unfinished runs, and the
    judge chunks of runs whose judge rung stalled for longer than a lease
    (``ASSAY["TRIAL_LEASE_SECONDS"]``). Returns the counts; enqueues nothing when nothing is
    stale. Two queries, plus a few per running run whose grader set has a judge."""

    now = now or timezone.now()
    open_runs = [Run.Status.QUEUED, Run.Status.RUNNING]
    stale: dict[int, list[int]] = {}
    for run_id, trial_id in (
        Trial.objects.filter(
            status=Trial.Status.RUNNING, lease_expires_at__lt=now, run__status__in=open_runs
        )
        .order_by("run_id", "id")
        .values_list("run_id", "id")
    ):
        stale.setdefault(run_id, []).append(trial_id)
    chunks = 0
    for run_id, ids in stale.items():
        for chunk in chunked(ids, trial_chunk_size()):
            _chunk_enqueue(run_id, chunk)
            chunks += 1

    quiet_since = now - timedelta(seconds=settings.ASSAY["TRIAL_LEASE_SECONDS"])
    judge_runs = judge_chunks = 0
    candidates = [
        run_id
        for run_id, graders in Run.objects.filter(status=Run.Status.RUNNING)
        .exclude(id__in=stale)
        .values_list("id", "graders")
        if any(isinstance(g, dict) and g.get("kind") == "judge" for g in graders or [])
    ]
    for run_id in candidates:
        trials = Trial.objects.filter(run_id=run_id)
        if trials.filter(status__in=[Trial.Status.QUEUED, Trial.Status.RUNNING]).exists():
            continue
        last = max(
            filter(
                None,
                [
                    trials.aggregate(m=Max("finished_at"))["m"],
                    Grade.objects.filter(trial__run_id=run_id).aggregate(m=Max("created_at"))["m"],
                ],
            ),
            default=None,
        )
        if last is not None and last > quiet_since:
            continue
        if not _judge_grading_pending(run_id):
            continue
        ids = list(
            trials.filter(status=Trial.Status.OK).order_by("id").values_list("id", flat=True)
        )
        for chunk in chunked(ids, trial_chunk_size()):
            _judge_chunk_enqueue(run_id, chunk)
            judge_chunks += 1
        judge_runs += 1
    return SweepResult(
        runs=len(stale),
        trials=sum(len(v) for v in stale.values()),
        chunks=chunks,
        judge_runs=judge_runs,
        judge_chunks=judge_chunks,
    )
