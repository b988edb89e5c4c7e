"""The sweeper: takes back work a dead worker or a lost broker left behind.

``runs_sweep`` runs every ``ASSAY["SWEEP_SECONDS"]`` (Celery beat, or cron). One pass
(1) resends outbox messages unsent after a grace period; (2) enqueues again the chunks of
trials whose lease expired (the broker redelivers an ``acks_late`` task only after its own
timeout, an hour on Redis) and the queued trials of runs idle for a lease; (3) enqueues
again the judge rung of ok trials missing a judge grade for a lease; (4) cancels a cancelled
run's trials left running and finalizes it; (5) resends judge calls a dead worker claimed
(``JudgeRung.claims_sweep``). Claims are compare-and-sets, so nothing is called twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from core.chunks import chunked
from core.outbox import outbox_resend, outbox_written_since
from evals.grading.rungs import judge_rung
from evals.models import Grade, Run, Trial
from evals.runner.execute import _judge_chunk_enqueue
from evals.runner.finalize import run_finalize, trials_cancel
from evals.runner.start import _chunks_enqueue, run_subject, trial_chunk_size


@dataclass(frozen=True)
class SweepResult:
    """What one sweep did: ``trials`` with an expired lease enqueued again in ``chunks`` over
    ``runs``; ``judge_chunks`` over ``judge_runs``; ``messages`` resent; ``judge_claims``
    expired and the ``judge_claim_tasks`` sent for them."""

    runs: int = 0
    trials: int = 0
    chunks: int = 0
    judge_runs: int = 0
    judge_chunks: int = 0
    messages: int = 0
    judge_claims: int = 0
    judge_claim_tasks: int = 0


def runs_sweep(*, now: datetime | None = None) -> SweepResult:
    """One pass of the sweeper; enqueues nothing when nothing is stale. A few queries, plus a few
    per open run whose grader set has a judge."""

    now = now or timezone.now()
    messages = outbox_resend(now=now)
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
    lease = timedelta(seconds=settings.ASSAY["TRIAL_LEASE_SECONDS"])
    taken = {run_id: list(ids) for run_id, ids in stale.items()}
    for run_id, ids in _queued_orphans(set(stale), now - lease).items():
        taken[run_id] = sorted({*taken.get(run_id, []), *ids})
    chunks = 0
    for run_id, ids in taken.items():
        run_chunks = chunked(ids, trial_chunk_size())
        _chunks_enqueue(run_id, run_chunks)
        chunks += len(run_chunks)

    judge_runs = judge_chunks = 0
    rung = judge_rung()
    judged_runs = (
        Run.objects.filter(status__in=open_runs) if rung is not None else Run.objects.none()
    )
    for run in judged_runs.only("id", "graders", "status"):
        keys = run.grader_set.judge_keys
        if not keys:
            continue
        if run.id in stale:
            # A worker died on this run: the ok trials it wrote before dying never got the
            # judge rung its chunk would have enqueued at its end. A live chunk renews its
            # leases every third of one, so trials written before that are not its own.
            ids = _judge_rung_missed(run.id, keys, now - lease / 3, busy_since=None)
        else:
            ids = _judge_rung_missed(run.id, keys, now - lease, busy_since=now - lease)
        for chunk in chunked(ids, trial_chunk_size()):
            _judge_chunk_enqueue(run.id, chunk)
            judge_chunks += 1
        judge_runs += bool(ids)

    _cancelled_runs_close(now)
    # a dead worker's judge calls, claimed, not answered
    claims, claim_tasks = rung.claims_sweep(now=now) if rung is not None else (0, 0)
    return SweepResult(
        runs=len(taken),
        trials=sum(len(v) for v in taken.values()),
        chunks=chunks,
        judge_runs=judge_runs,
        judge_chunks=judge_chunks,
        messages=messages,
        judge_claims=claims,
        judge_claim_tasks=claim_tasks,
    )


def _queued_orphans(dead: set[int], idle_since: datetime) -> dict[int, list[int]]:
    """Queued trials no chunk message may still carry, by run: those of ``dead`` runs, and of open
    runs where nothing happened since ``idle_since`` (a lost message)."""
    open_runs = [Run.Status.QUEUED, Run.Status.RUNNING]
    waiting = set(
        Trial.objects.filter(status=Trial.Status.QUEUED, run__status__in=open_runs)
        .values_list("run_id", flat=True)
        .distinct()
    )
    orphaned = waiting & dead
    for run_id in waiting - dead:
        busy = Trial.objects.filter(run_id=run_id).filter(
            Q(started_at__gte=idle_since) | Q(finished_at__gte=idle_since)
        )
        if busy.exists() or outbox_written_since(subject=run_subject(run_id), since=idle_since):
            continue
        orphaned.add(run_id)
    found: dict[int, list[int]] = {}
    for run_id, trial_id in (
        Trial.objects.filter(run_id__in=orphaned, status=Trial.Status.QUEUED)
        .order_by("run_id", "id")
        .values_list("run_id", "id")
    ):
        found.setdefault(run_id, []).append(trial_id)
    return found


def _judge_rung_missed(
    run_id: int, keys: tuple[str, ...], written_before: datetime, *, busy_since: datetime | None
) -> list[int]:
    """Ids of the run's ok trials written before ``written_before`` that lack a grade of some
    judge grader in ``keys``; none when a judge grade of the run was written after
    ``busy_since`` (its judge rung is at work)."""
    if (
        busy_since is not None
        and Grade.objects.filter(
            trial__run_id=run_id, grader__in=keys, created_at__gte=busy_since
        ).exists()
    ):
        return []
    return list(
        Trial.objects.filter(run_id=run_id, status=Trial.Status.OK, finished_at__lt=written_before)
        .annotate(judged=Count("grades", filter=Q(grades__grader__in=keys)))
        .filter(judged__lt=len(keys))
        .order_by("id")
        .values_list("id", flat=True)
    )


def _cancelled_runs_close(now: datetime) -> None:
    """Trials a dead worker held on a cancelled run become cancelled; the run is finalized."""
    left: dict[int, list[int]] = {}
    for run_id, trial_id in Trial.objects.filter(
        status=Trial.Status.RUNNING, lease_expires_at__lt=now, run__status=Run.Status.CANCELLED
    ).values_list("run_id", "id"):
        left.setdefault(run_id, []).append(trial_id)
    for run_id, ids in left.items():
        trials_cancel(run_id=run_id, trial_ids=ids, uncount=False)
        run_finalize(run_id=run_id)
