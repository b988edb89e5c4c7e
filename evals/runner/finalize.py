"""Closing a run: recount its trials and close it once none is queued or running
(``failed`` when any trial or grade errored, never ``succeeded``), and cancelling one.
Both are compare-and-sets on the run's status, safe under redelivery."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.actors import actor_text, via_of
from core.errors import DomainError
from core.outbox import outbox_enqueue
from core.roles import ENGINEER, LEAD, role_require
from evals.metrics import trials_finished_count
from evals.models import ExperimentVariant, Grade, Run, TopUp, Trial
from evals.tasks import adaptive_top_up_start, experiment_settle_advance, top_up_advance

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrialCounts:
    """A run's trials by status."""

    total: int
    queued: int
    running: int
    ok: int
    errored: int
    cancelled: int


def _trial_counts(run_id: int) -> TrialCounts:
    """The run's trials by status, one ``GROUP BY``. A replaced errored trial neither errs the run
    nor counts."""
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q('status')}, COUNT(*) FROM {q(Trial._meta.db_table)} "
            f"WHERE {q('run_id')} = %s AND {q('replaced_by_id')} IS NULL GROUP BY {q('status')}",
            [run_id],
        )
        by_status = dict(cursor.fetchall())
    return TrialCounts(
        total=sum(by_status.values()),
        queued=by_status.get(Trial.Status.QUEUED.value, 0),
        running=by_status.get(Trial.Status.RUNNING.value, 0),
        ok=by_status.get(Trial.Status.OK.value, 0),
        errored=by_status.get(Trial.Status.ERROR.value, 0),
        cancelled=by_status.get(Trial.Status.CANCELLED.value, 0),
    )


def _trials_live(run_id: int) -> bool:
    """Whether some trial of the run is queued or running: one indexed ``EXISTS``, so a
    finalize while the run goes on (each chunk message's) does not count every trial."""
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {q(Trial._meta.db_table)} WHERE {q('run_id')} = %s AND "
            f"{q('status')} IN (%s, %s) LIMIT 1",
            [run_id, Trial.Status.QUEUED.value, Trial.Status.RUNNING.value],
        )
        return cursor.fetchone() is not None


# How a target's error for a refused request parameter begins (providers.answers).
REJECTED_PARAMETER = "rejected_parameter: "


def _one_refusal(run_id: int, errored: int) -> str:
    """The rejected-parameter error every errored trial shares (at most 300 characters), or "" when
    they differ: a run whose calls were all refused says why once."""
    refused = Trial.objects.filter(
        run_id=run_id,
        replaced_by__isnull=True,
        status=Trial.Status.ERROR,
        error_message__startswith=REJECTED_PARAMETER,
    ).order_by()
    messages = list(refused.values_list("error_message", flat=True).distinct()[:2])
    if len(messages) != 1 or refused.count() != errored:
        return ""
    return messages[0][:300]


def run_finalize(*, run_id: int) -> Run:
    """Recount a run's trials and, once none is queued or running, close it: ``failed`` when any
    trial or grade errored (``error_message`` "3 of 60 trials errored; 2 grade errors", of the
    finished), else ``succeeded``; a cancelled run stays cancelled. A run with judges stays
    ``running`` until every ok trial has every judge grade. Idempotent: counters are recounted
    and the status change is a compare-and-set."""
    run_close_if_done(run_id=run_id)
    return Run.objects.get(id=run_id)


# The run's columns finalizing reads (``run_close_if_done``): one query for the judge check, the
# "already closed with these counts" check and the adaptive top-up's start.
_FINALIZE_FIELDS = (
    "status",
    "finished_at",
    "trials_finished",
    "trials_errored",
    "trials_cancelled",
    "graders",
    "against_id",
)


def run_close_if_done(*, run_id: int) -> None:
    """``run_finalize`` without reading the run back: one indexed query while trials are live."""
    if _trials_live(run_id):
        # Live counters are F() increments made with each trial write; a recount here
        # could race a concurrent write and overwrite it with a stale figure.
        return
    counts = _trial_counts(run_id)
    now = timezone.now()
    if counts.queued or counts.running:  # a trial queued since the check above
        return
    run = Run.objects.only(*_FINALIZE_FIELDS).get(id=run_id)
    if _judge_grading_pending(run):
        return
    settled = (
        run.status in Run.TERMINAL
        and run.finished_at is not None
        and run.trials_finished == counts.ok + counts.errored
        and run.trials_errored == counts.errored
        and run.trials_cancelled == counts.cancelled
    )
    if settled:
        # Closed, with these counts: the writes below would change nothing (the counts are
        # the same; both status changes are compare-and-sets on a run not yet closed). The
        # messages of chunks whose trials another chunk took (``trial_chunk_execute``) end
        # here: reads, not three updates and a commit each (~100 of them for a 10,000-trial
        # run, behind which a one-worker queue held the next run's first chunk).
        _top_ups_advance(run_id)
        # A racing experiment was moved on when the run closed (its outbox message commits
        # with the close), so this read-only path stays at its seven reads.
        closed = 0
    else:
        closed = _run_close(run_id, counts, now)
        run = Run.objects.get(id=run_id)
    if closed:
        # Once, as the run closes: what any comparison against it reads (its RunData and
        # detectable drop), so a first view of a pair reads two rows, not every trial.
        # Imported here: it needs scipy, which a command that waits never loads (a worker
        # imports it when ready: evals.apps.WORKER_WARM_MODULES).
        from evals.comparison.summary import run_summary_refresh  # noqa: PLC0415

        run_summary_refresh(run=run)
        _baseline_verdict_refresh(run)
        _experiment_decision_warm(run)
    if (
        run.against_id is not None
        and run.status == Run.Status.SUCCEEDED
        and not TopUp.objects.filter(head_id=run_id, base_id=run.against_id).exists()
    ):
        # An adaptive run's first round is done: settle its uncertain cases.
        outbox_enqueue(adaptive_top_up_start, run_id, subject=f"evals.run:{run_id}")


def _experiment_decision_warm(run: Run) -> None:
    """An experiment's decision, computed once its last variant closes (the page then reads
    it from the cache); a failure is logged, never a failed finalize."""
    from evals.experiments.decision import experiment_decision_warm  # noqa: PLC0415

    try:
        experiment_decision_warm(run=run)
    except Exception:  # noqa: BLE001 - a warm cache is not worth a run that never closes
        logger.exception("run %s: its experiment's decision was not computed", run.ref_text)


def _baseline_verdict_refresh(run: Run) -> None:
    """The run list's regression flag for ``run``, decided once as it closes; a failure here is
    logged and leaves the flag "not compared", never a failed finalize."""
    from evals.comparison.baseline_verdicts import baseline_verdict_refresh  # noqa: PLC0415

    try:
        baseline_verdict_refresh(run=run)
    except Exception:  # noqa: BLE001 - a flag is not worth a run that never closes
        logger.exception(
            "run %s: the verdict against its suite's baseline was not decided", run.ref_text
        )


def _run_close(run_id: int, counts: TrialCounts, now: datetime) -> int:
    """Store the recount and close an open run; moves its top-ups on. Returns the runs closed (0 or
    1). One transaction."""
    grade_errors = Grade.objects.filter(
        trial__run_id=run_id, trial__replaced_by__isnull=True, status=Grade.Status.ERROR
    ).count()
    problems = []
    if counts.errored:
        refusal = _one_refusal(run_id, counts.errored)
        problems.append(
            # of the finished: a cancelled trial was not run (evals.run_status)
            f"{counts.errored} of {counts.ok + counts.errored} trials errored"
            + (f": {refusal}" if refusal else "")
        )
    if grade_errors:
        problems.append(f"{grade_errors} grade error{'s' if grade_errors != 1 else ''}")
    message = "; ".join(problems)
    with transaction.atomic():
        _top_ups_advance(run_id)
        _experiments_settle_advance(run_id)
        # Nothing is in flight: every trial write has committed, so the recount is exact.
        Run.objects.filter(id=run_id).update(
            trials_finished=counts.ok + counts.errored,
            trials_errored=counts.errored,
            trials_cancelled=counts.cancelled,
        )
        closed = Run.objects.filter(
            id=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
        ).update(
            status=Run.Status.FAILED if problems else Run.Status.SUCCEEDED,
            error_message=message,
            finished_at=now,
        )
        closed += Run.objects.filter(
            id=run_id, status=Run.Status.CANCELLED, finished_at__isnull=True
        ).update(finished_at=now, error_message=message)
    return closed


def _top_ups_advance(run_id: int) -> None:
    """Move on each active top-up with the run as base or head (``top_up_advance`` through the
    outbox). Idempotent."""
    for top_up_id in TopUp.objects.filter(
        Q(base_id=run_id) | Q(head_id=run_id),
        status__in=[TopUp.Status.QUEUED, TopUp.Status.RUNNING],
    ).values_list("id", flat=True):
        outbox_enqueue(top_up_advance, top_up_id, subject=f"evals.top_up:{top_up_id}")


def _experiments_settle_advance(run_id: int) -> None:
    """Move on the racing of the experiment the run is a variant of, if it races
    (``experiment_settle_advance`` through the outbox; ``evals.experiments.racing``). Idempotent."""
    for experiment_id in ExperimentVariant.objects.filter(
        run_id=run_id, experiment__racing__status="running"
    ).values_list("experiment_id", flat=True):
        outbox_enqueue(
            experiment_settle_advance, experiment_id, subject=f"evals.experiment:{experiment_id}"
        )


def _judge_grading_pending(run: Run) -> bool:
    """True while some ok trial of a running run lacks a grade of a judge grader of its set
    (no query when the set has no judge)."""
    if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
        return False
    keys = run.grader_set.judge_keys
    if not keys:
        return False
    ok = Trial.objects.filter(run_id=run.id, status=Trial.Status.OK)
    judged = Grade.objects.filter(trial__in=ok, grader__in=keys).count()
    return judged < ok.count() * len(keys)


def trials_cancel(
    *, run_id: int, trial_ids: list[int], uncount: bool, errors: dict[int, str] | None = None
) -> int:
    """Cancel ``run_id``'s trials that are queued or claimed and not answered (compare-and-set);
    returns how many. ``uncount``: also out of ``trials_total``; ``errors``: trial id -> what its
    call did before it stopped, kept as ``error_message``."""
    if not trial_ids:
        return 0
    with transaction.atomic():
        live = Trial.objects.filter(
            id__in=trial_ids,
            run_id=run_id,
            status__in=[Trial.Status.QUEUED, Trial.Status.RUNNING],
        )
        if errors and connection.features.has_select_for_update:
            live = live.select_for_update()
        changing = list(live.values_list("id", flat=True)) if errors else None
        changed = live.update(
            status=Trial.Status.CANCELLED, finished_at=timezone.now(), lease_expires_at=None
        )
        if errors and changing:
            for trial_id in changing:
                if errors.get(trial_id):
                    Trial.objects.filter(id=trial_id).update(error_message=errors[trial_id])
        trials_finished_count(cancelled=changed)
        if changed and uncount:
            Run.objects.filter(id=run_id).update(trials_total=F("trials_total") - changed)
        elif changed:  # counted apart from the finished, never in "N of M trials errored"
            Run.objects.filter(id=run_id).update(trials_cancelled=F("trials_cancelled") + changed)
    return changed


def run_cancel(*, run: Run, by=None, via: str | None = None, refuse_finished: bool = False) -> bool:
    """Cancel a queued or running run (compare-and-set); queued trials become cancelled, chunks
    stop at their next batch (``evals.runner.execute``). Engineers and leads; ``by`` and ``via``
    (``core.actors.Via``) are stored and logged. Returns False when already terminal; with
    ``refuse_finished`` a succeeded or failed run raises ``DomainError(field="run",
    code="conflict")`` instead. Raises PermissionDenied."""
    if by is not None:
        role_require(by, ENGINEER, LEAD, action="cancelling a run")
    user = by if by is not None and by.is_authenticated else None
    with transaction.atomic():
        changed = Run.objects.filter(
            id=run.id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
        ).update(status=Run.Status.CANCELLED, cancelled_by=user, cancelled_via=via_of(user, via))
        if changed:
            n = Trial.objects.filter(run_id=run.id, status=Trial.Status.QUEUED).update(
                status=Trial.Status.CANCELLED, finished_at=timezone.now()
            )
            Run.objects.filter(id=run.id).update(trials_cancelled=F("trials_cancelled") + n)
            trials_finished_count(cancelled=n)
    if changed:
        logger.info("run %s cancelled %s", run.ref_text, actor_text(by=user, via=via))
    run_finalize(run_id=run.id)
    run.refresh_from_db()
    if refuse_finished and not changed and run.status != Run.Status.CANCELLED:
        raise DomainError(
            f"run {run.name!r} has already {run.status}; nothing to cancel",
            field="run",
            code="conflict",
        )
    return bool(changed)
