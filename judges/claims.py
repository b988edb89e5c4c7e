"""Claims on judge calls: a worker claims the row a judge call will write before paying
for it, as the runner claims trials, so a redelivered or duplicated task never calls twice.

A claim's key is its row's: a grade's (trial, grader), a pairwise verdict's (pair, judge
version, position). One execution of a chunk holds its claims under a ``holder`` token:
it takes missing and expired claims (compare-and-sets) and skips keys already written or
held by another live execution; renews them every third of a lease while calls are in
flight; deletes each in the transaction writing its row, the rest when it ends. A killed
worker's claims expire (lease: ``ASSAY["TRIAL_LEASE_SECONDS"]``) and are taken over by a
redelivery or re-enqueued by ``judge_claims_sweep``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from core.outbox import outbox_enqueue
from evals.models import Grade, Run
from judges import tasks
from judges.models import JudgeClaim, JudgeRun, PairwiseVerdict

Presentation = tuple[int, str]  # (pair id, position)


def claim_lease() -> timedelta:
    """How long a claim holds without renewal: ``ASSAY["TRIAL_LEASE_SECONDS"]``."""
    return timedelta(seconds=settings.ASSAY["TRIAL_LEASE_SECONDS"])


def claim_renew_every_s() -> float:
    """Seconds between two renewals of the claims in flight: a third of the lease."""
    return claim_lease().total_seconds() / 3


def holder_new() -> uuid.UUID:
    """A token for one execution of a chunk: the holder of the claims it takes."""
    return uuid.uuid4()


def _expired_taken_over(scope: Q, *, holder: uuid.UUID, lease: datetime, now: datetime) -> None:
    """Take over the expired claims in ``scope`` (rows locked by another taker are skipped on
    PostgreSQL; SQLite serialises writers)."""
    expired = JudgeClaim.objects.filter(scope, lease_expires_at__lt=now).exclude(holder=holder)
    if connection.features.has_select_for_update_skip_locked:
        expired = expired.select_for_update(skip_locked=True)
    ids = list(expired.order_by("id").values_list("id", flat=True))
    if ids:
        JudgeClaim.objects.filter(id__in=ids, lease_expires_at__lt=now).update(
            holder=holder, lease_expires_at=lease, claimed_at=now
        )


def grade_claims_take(
    *,
    trial_ids: list[int],
    grader: str,
    judge_version_id: int,
    holder: uuid.UUID,
    judge_run_id: int | None = None,
) -> set[int]:
    """Claim (trial, ``grader``) of ``trial_ids`` for ``holder``; returns the trial ids now held,
    none already graded. A compare-and-set, idempotent for one holder."""
    if not trial_ids:
        return set()
    now = timezone.now()
    lease = now + claim_lease()
    ids = sorted(set(trial_ids))
    scope = Q(trial_id__in=ids, grader=grader)
    with transaction.atomic():
        JudgeClaim.objects.bulk_create(
            [
                JudgeClaim(
                    judge_version_id=judge_version_id,
                    trial_id=trial_id,
                    grader=grader,
                    judge_run_id=judge_run_id,
                    holder=holder,
                    lease_expires_at=lease,
                    claimed_at=now,
                )
                for trial_id in ids
            ],
            ignore_conflicts=True,
        )
        _expired_taken_over(scope, holder=holder, lease=lease, now=now)
        held = set(
            JudgeClaim.objects.filter(scope, holder=holder).values_list("trial_id", flat=True)
        )
        done = set(
            Grade.objects.filter(trial_id__in=held, grader=grader).values_list(
                "trial_id", flat=True
            )
        )
        if done:
            JudgeClaim.objects.filter(trial_id__in=done, grader=grader, holder=holder).delete()
    return held - done


def presentation_claims_take(
    *,
    presentations: list[Presentation],
    judge_version_id: int,
    holder: uuid.UUID,
    judge_run_id: int | None = None,
) -> set[Presentation]:
    """Claim (pair id, position) of ``judge_version_id`` for ``holder``; returns those held,
    none with a stored verdict."""
    if not presentations:
        return set()
    now = timezone.now()
    lease = now + claim_lease()
    wanted = sorted(set(presentations))
    pair_ids = sorted({p for p, _ in wanted})
    scope = Q(pair_id__in=pair_ids, judge_version_id=judge_version_id)
    with transaction.atomic():
        JudgeClaim.objects.bulk_create(
            [
                JudgeClaim(
                    judge_version_id=judge_version_id,
                    pair_id=pair_id,
                    position=position,
                    judge_run_id=judge_run_id,
                    holder=holder,
                    lease_expires_at=lease,
                    claimed_at=now,
                )
                for pair_id, position in wanted
            ],
            ignore_conflicts=True,
        )
        _expired_taken_over(scope, holder=holder, lease=lease, now=now)
        held = set(
            JudgeClaim.objects.filter(scope, holder=holder).values_list("pair_id", "position")
        ) & set(wanted)
        done = (
            set(
                PairwiseVerdict.objects.filter(
                    pair_id__in=pair_ids, judge_version_id=judge_version_id
                ).values_list("pair_id", "position")
            )
            & held
        )
        for pair_id, position in done:
            JudgeClaim.objects.filter(
                pair_id=pair_id,
                position=position,
                judge_version_id=judge_version_id,
                holder=holder,
            ).delete()
    return held - done


def judge_claims_renew(*, holder: uuid.UUID) -> int:
    """Push the lease of ``holder``'s claims one lease ahead; returns how many it still holds."""
    return JudgeClaim.objects.filter(holder=holder).update(
        lease_expires_at=timezone.now() + claim_lease()
    )


def judge_claims_release(
    *,
    holder: uuid.UUID,
    trial_ids: list[int] | None = None,
    grader: str = "",
    presentations: list[Presentation] | None = None,
) -> int:
    """Delete ``holder``'s claims (of ``trial_ids``/``presentations`` when given, else all);
    returns how many. Claims another holder took over are untouched."""
    claims = JudgeClaim.objects.filter(holder=holder)
    if trial_ids is not None:
        claims = claims.filter(trial_id__in=trial_ids, grader=grader)
    elif presentations is not None:
        keys = Q(pk__in=[])
        for pair_id, position in presentations:
            keys |= Q(pair_id=pair_id, position=position)
        claims = claims.filter(keys)
    deleted, _ = claims.delete()
    return deleted


@dataclass(frozen=True)
class ClaimSweep:
    """``claims`` expired found, ``tasks`` enqueued to take them over, ``dropped`` deleted because
    their run or judge run is no longer live."""

    claims: int = 0
    tasks: int = 0
    dropped: int = 0


def judge_claims_sweep(*, now: datetime | None = None) -> ClaimSweep:
    """Re-enqueue (after commit) one judge task per run or judge run holding expired claims; the
    task takes them over. Expired claims of a cancelled or finished run are deleted. Called
    once per sweep by ``evals.runner.sweeper.runs_sweep``."""
    now = now or timezone.now()
    expired = list(
        JudgeClaim.objects.filter(lease_expires_at__lt=now)
        .order_by("id")
        .values_list("id", "judge_run_id", "trial_id", "trial__run_id", "pair_id")
    )
    if not expired:
        return ClaimSweep()
    open_runs = set(
        Run.objects.filter(
            id__in={r for _, jr, _, r, _ in expired if jr is None and r is not None},
            status__in=[Run.Status.QUEUED, Run.Status.RUNNING],
        ).values_list("id", flat=True)
    )
    judge_runs = {
        jr.id: jr
        for jr in JudgeRun.objects.filter(
            id__in={jr for _, jr, _, _, _ in expired if jr is not None},
            status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING],
        )
    }
    rung: dict[int, list[int]] = {}
    pointwise: dict[int, list[int]] = {}
    pairwise: dict[int, list[int]] = {}
    dropped: list[int] = []
    for claim_id, judge_run_id, trial_id, run_id, pair_id in expired:
        if judge_run_id is None and run_id in open_runs:
            rung.setdefault(run_id, []).append(trial_id)
        elif judge_run_id in judge_runs and pair_id is not None:
            pairwise.setdefault(judge_run_id, []).append(pair_id)
        elif judge_run_id in judge_runs and trial_id is not None:
            pointwise.setdefault(judge_run_id, []).append(trial_id)
        else:
            dropped.append(claim_id)
    with transaction.atomic():
        JudgeClaim.objects.filter(id__in=dropped, lease_expires_at__lt=now).delete()
        for run_id, trial_ids in rung.items():
            outbox_enqueue(
                tasks.run_chunk_judge, run_id, sorted(trial_ids), subject=f"evals.run:{run_id}"
            )
        for judge_run_id, trial_ids in pointwise.items():
            jr = judge_runs[judge_run_id]
            outbox_enqueue(
                tasks.judge_run_execute,
                jr.run_id,
                jr.judge_version_id,
                sorted(set(trial_ids)),
                subject=f"judges.judge_run:{judge_run_id}",
            )
        for judge_run_id, pair_ids in pairwise.items():
            outbox_enqueue(
                tasks.pairwise_judge_run_execute,
                judge_run_id,
                sorted(set(pair_ids)),
                subject=f"judges.judge_run:{judge_run_id}",
            )
    return ClaimSweep(
        claims=len(expired), tasks=len(rung) + len(pointwise) + len(pairwise), dropped=len(dropped)
    )
