"""Judge runs: one judge version grading (a sample of) a finished run's ok trials, in
chunk tasks enqueued after commit, with progress recounted from the grade rows and a
cancel that stops further paid calls.

A chunk is graded in waves of ``concurrency`` trials (the version's client setting, default
8: as many calls as the client sends at once). Before each wave the worker re-reads the
judge run's status; once a cancel has set it (a compare-and-set from queued or running to
cancelled) no further call is made: after a cancel, only the calls of the wave already in
flight complete (at most ``concurrency``; exactly none more when ``concurrency`` is 1).
Progress counts trials (graded / to grade), recounted from the grade rows after a wave when
``PROGRESS_EVERY_S`` (1 s) has passed since the chunk's last recount, and always at the
chunk's end: the bar moves by waves of trials, and a fast endpoint does not pay a recount
(a query over the judge run's trial ids) per wave.

Cost of the waves (measured against the shared mock, 200 ms a call, 96 trials, concurrency
8, on the 2-core machine at load 8 to 13; 2.4 s would be concurrency/latency): 6.0 to 6.4 s,
against 3.8 to 4.7 s when a whole chunk of 50 went out at once. Each wave builds its client
(``judges.grading.calls_run``) and waits for its slowest call; against real judge latencies
(seconds a call) the client's share shrinks, the wait for the slowest call does not.

A pairwise judge run (``pairwise_judge_run_start``) is the same job on pairs: a head run
against a base run of the same suite, attempt i of each case against attempt i
(``judges.pairwise.run_pairs_build``), each pair judged in both presentation orders
(``judges.pairwise.pairs_judge``). It is chunked, waved (``concurrency // 2`` pairs a
wave, at least 1: two calls a pair), cancelled and counted like a pointwise one, its
counts counting pairs from the ``PairwiseVerdict`` rows: graded = both orders stored,
errored = an order without a verdict.

How a judge run ends (``judge_run_progress``): once every trial has a grade it is
``failed`` when every grade errored (no verdict at all: nothing was judged), else
``succeeded``; ``error_message`` says how many grades errored and why (most frequent
reasons first). A cancelled run stays cancelled.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter

from django.db import transaction
from django.utils import timezone

from core.chunks import chunked
from core.errors import DomainError
from core.outbox import outbox_enqueue
from evals.models import Grade, Run, Trial, TrialPair
from judges import tasks
from judges.grading import Sleep, judge_grade_trials
from judges.models import Judge, JudgeRun, JudgeVersion, PairwiseVerdict
from judges.pairwise import pairs_judge, run_pairs_build

logger = logging.getLogger(__name__)

JUDGE_RUN_CHUNK = 50
PROGRESS_EVERY_S = 1.0
LIVE = (JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING)


def judge_run_start(
    *,
    run: Run,
    judge_version: JudgeVersion,
    sample: int | None = None,
    by=None,
    seed: int | None = None,
) -> JudgeRun:
    """Grade ``run``'s ok trials (all, or a random ``sample`` of them, reproducible with
    ``seed``) with ``judge_version`` in Celery tasks enqueued after commit, in chunks of
    ``JUDGE_RUN_CHUNK`` trials. Raises ``DomainError`` naming the field for a bad
    sample size, or for a pairwise or recorded judge version (they do not grade single
    trials: refused here, before a task could fail on it)."""

    if judge_version.judge.kind in (Judge.Kind.PAIRWISE, Judge.Kind.RECORDED):
        hint = (
            ": it compares two runs (pairwise_judge_run_start; judge_run --pairwise BASE)"
            if judge_version.judge.kind == Judge.Kind.PAIRWISE
            else ""
        )
        raise DomainError(
            f"a {judge_version.judge.kind} judge does not grade single trials{hint}",
            field="judge_version",
        )
    if sample is not None and sample < 1:
        raise DomainError(f"expected a positive number, got {sample}", field="sample")
    ids = list(
        run.trials.filter(status=Trial.Status.OK).order_by("id").values_list("id", flat=True)
    )
    if sample is not None and sample < len(ids):
        ids = sorted(random.Random(seed).sample(ids, sample))
    with transaction.atomic():
        judge_run, _ = JudgeRun.objects.select_for_update().get_or_create(
            run=run,
            base_run=None,
            judge_version=judge_version,
            defaults={"grader": judge_version.grader_key},
        )
        judge_run.status = JudgeRun.Status.QUEUED
        judge_run.trial_ids = ids
        judge_run.trials_total = len(ids)
        judge_run.trials_graded = 0
        judge_run.trials_errored = 0
        judge_run.error_message = ""
        judge_run.started_by = by
        judge_run.cancelled_by = None
        judge_run.finished_at = None
        judge_run.save()
        chunks = chunked(ids, JUDGE_RUN_CHUNK)
        for chunk in chunks or [[]]:
            outbox_enqueue(
                tasks.judge_run_execute,
                run.id,
                judge_version.id,
                chunk,
                subject=f"judges.judge_run:{judge_run.id}",
            )
    return judge_run


def pairwise_judge_run_start(
    *, base: Run, head: Run, judge_version: JudgeVersion, by=None
) -> JudgeRun:
    """Compare ``head`` with ``base`` with a pairwise ``judge_version``: every case and
    attempt ok in both runs is a pair (``run_pairs_build``; the unpaired are counted in
    ``unpaired``), judged in both orders in Celery tasks enqueued after commit, in chunks of
    ``JUDGE_RUN_CHUNK`` pairs. Starting again reuses the (head, base, version) judge run;
    presentations already stored are not called again.

    Raises ``DomainError`` naming the field: ``judge_version`` when it is not pairwise;
    ``base_run``/``head_run`` when a run is still queued or running; ``head_run`` when the
    runs are one run, of two suites, or share no ok (case, attempt).
    """
    if judge_version.judge.kind != Judge.Kind.PAIRWISE:
        raise DomainError(
            f"a {judge_version.judge.kind} judge does not compare two runs: choose a pairwise "
            "judge version",
            field="judge_version",
        )
    for field, run in (("base_run", base), ("head_run", head)):
        if run.status in (Run.Status.QUEUED, Run.Status.RUNNING):
            raise DomainError(
                f"run {run.name!r} is {run.status}; compare it once it has finished", field=field
            )
    with transaction.atomic():
        pair_ids, unpaired = run_pairs_build(base=base, head=head)
        if not pair_ids:
            raise DomainError(
                f"runs {base.name!r} and {head.name!r} have no case and attempt ok in both: "
                "nothing to compare",
                field="head_run",
            )
        judge_run, _ = JudgeRun.objects.select_for_update().get_or_create(
            run=head,
            base_run=base,
            judge_version=judge_version,
            defaults={"grader": judge_version.grader_key},
        )
        judge_run.status = JudgeRun.Status.QUEUED
        judge_run.trial_ids = pair_ids
        judge_run.trials_total = len(pair_ids)
        judge_run.unpaired = unpaired
        judge_run.trials_graded = 0
        judge_run.trials_errored = 0
        judge_run.error_message = ""
        judge_run.started_by = by if by is not None and by.is_authenticated else None
        judge_run.cancelled_by = None
        judge_run.finished_at = None
        judge_run.save()
        for chunk in chunked(pair_ids, JUDGE_RUN_CHUNK):
            outbox_enqueue(
                tasks.pairwise_judge_run_execute,
                judge_run.id,
                chunk,
                subject=f"judges.judge_run:{judge_run.id}",
            )
    return judge_run


def pairwise_judge_run_execute(
    *, judge_run_id: int, pair_ids: list[int], sleep: Sleep | None = None
) -> None:
    """Judge one chunk of a pairwise judge run in waves of ``concurrency // 2`` pairs (at
    least 1), re-reading the judge run's status before each wave (no further call once it
    is cancelled); progress recounted as in ``judge_run_execute``.

    Idempotent; safe under redelivery (verdicts keyed by (pair, judge version, position)).
    A cancelled or finished judge run does nothing.
    """
    judge_run = (
        JudgeRun.objects.filter(id=judge_run_id, base_run__isnull=False)
        .select_related("judge_version__judge")
        .first()
    )
    if judge_run is None or judge_run.status in JudgeRun.TERMINAL:
        return
    JudgeRun.objects.filter(id=judge_run.id, status=JudgeRun.Status.QUEUED).update(
        status=JudgeRun.Status.RUNNING
    )
    pairs = list(
        TrialPair.objects.filter(id__in=pair_ids)
        .select_related("case", "trial_a", "trial_b")
        .order_by("id")
    )
    _waves_run(
        judge_run,
        pairs,
        size=max(1, wave_size(judge_run.judge_version) // 2),
        judge=lambda wave: pairs_judge(
            pairs=wave, judge_version=judge_run.judge_version, sleep=sleep
        ),
    )


def _waves_run(judge_run: JudgeRun, items: list, *, size: int, judge) -> None:
    """Judge ``items`` in waves of ``size`` (``judge(wave)``), re-reading the judge run's
    status before each wave (no further paid call once it is cancelled or finished) and
    recounting progress at most every ``PROGRESS_EVERY_S`` and at the end."""
    counted = time.monotonic()
    for wave in chunked(items, size):
        if not judge_run_live(judge_run_id=judge_run.id):
            logger.info("judge run %s is no longer live: no further calls", judge_run.id)
            break
        judge(wave)
        if time.monotonic() - counted >= PROGRESS_EVERY_S:
            judge_run_progress(judge_run_id=judge_run.id)
            counted = time.monotonic()
    judge_run_progress(judge_run_id=judge_run.id)


def wave_size(judge_version: JudgeVersion) -> int:
    """Trials graded per wave: the version's ``concurrency`` client setting (default 8,
    at least 1), so a wave is what the client sends at once."""
    try:
        return max(1, int(judge_version.params.get("concurrency", 8)))
    except (TypeError, ValueError):
        return 8


def judge_run_live(*, judge_run_id: int) -> bool:
    """True while the judge run is queued or running (neither cancelled nor finished): the
    check a worker makes before each wave of paid calls."""
    return JudgeRun.objects.filter(id=judge_run_id, status__in=LIVE).exists()


def judge_run_execute(
    *, run_id: int, judge_version_id: int, trial_ids: list[int], sleep: Sleep | None = None
) -> None:
    """Grade one chunk of a judge run in waves (module docstring), recounting progress at
    most every ``PROGRESS_EVERY_S`` and at the end; stops before the next wave once the judge
    run is cancelled.

    Idempotent; safe under redelivery (grades keyed by (trial, grader); trials already
    graded are not called again). A cancelled or finished judge run does nothing.
    """
    judge_run = (
        JudgeRun.objects.filter(run_id=run_id, judge_version_id=judge_version_id)
        .select_related("judge_version__judge")
        .first()
    )
    if judge_run is None or judge_run.status in JudgeRun.TERMINAL:
        return
    JudgeRun.objects.filter(id=judge_run.id, status=JudgeRun.Status.QUEUED).update(
        status=JudgeRun.Status.RUNNING
    )
    trials = list(
        Trial.objects.filter(id__in=trial_ids, run_id=run_id).select_related("case").order_by("id")
    )
    _waves_run(
        judge_run,
        trials,
        size=wave_size(judge_run.judge_version),
        judge=lambda wave: judge_grade_trials(
            trials=wave, judge_version=judge_run.judge_version, grader=judge_run.grader, sleep=sleep
        ),
    )


def _errors_text(reasons: Counter, errored: int, graded: int, *, pairs: bool = False) -> str:
    """How many grades (pairwise: pairs, with the reasons of their errored presentations)
    errored and why, most frequent reasons first; empty when none did."""
    if not errored:
        return ""
    why = ", ".join(f"{reason} {count}" for reason, count in reasons.most_common(5))
    if pairs:
        if errored == graded:
            return f"every pair errored ({errored} of {graded}; presentations: {why})"
        return f"{errored} of {graded} pairs errored (presentations: {why})"
    if errored == graded:
        return f"every grade errored ({errored} of {graded}): {why}"
    return f"{errored} of {graded} grades errored: {why}"


def _pairs_counted(judge_run: JudgeRun) -> tuple[int, int, Counter]:
    """A pairwise judge run's (pairs with both orders stored, pairs with an errored order,
    reasons of the errored presentations)."""
    rows = PairwiseVerdict.objects.filter(
        pair_id__in=judge_run.trial_ids, judge_version_id=judge_run.judge_version_id
    ).values_list("pair_id", "status", "reason")
    positions: Counter = Counter()
    errored_pairs: set[int] = set()
    reasons: Counter = Counter()
    for pair_id, status, reason in rows:
        positions[pair_id] += 1
        if status == PairwiseVerdict.Status.ERROR:
            errored_pairs.add(pair_id)
            reasons[reason.split(":", 1)[0] or "error"] += 1
    graded = sum(1 for n in positions.values() if n >= len(PairwiseVerdict.Position.values))
    return graded, len(errored_pairs), reasons


def judge_run_progress(*, judge_run_id: int) -> JudgeRun:
    """Recount graded and errored trials from the grade rows (pairwise: pairs from the
    verdict rows, ``_pairs_counted``); once every trial has a grade,
    close the judge run: ``failed`` when every grade errored, else ``succeeded``
    (compare-and-set from queued or running: a cancelled run stays cancelled)."""
    judge_run = JudgeRun.objects.get(id=judge_run_id)
    if judge_run.is_pairwise:
        graded, errored, reasons = _pairs_counted(judge_run)
    else:
        grades = Grade.objects.filter(trial_id__in=judge_run.trial_ids, grader=judge_run.grader)
        graded = grades.count()
        reasons = Counter(
            (reason.split(":", 1)[0] or "error")
            for reason in grades.filter(status=Grade.Status.ERROR).values_list("reason", flat=True)
        )
        errored = sum(reasons.values())
    message = _errors_text(reasons, errored, graded, pairs=judge_run.is_pairwise)
    JudgeRun.objects.filter(id=judge_run.id).update(
        trials_graded=graded, trials_errored=errored, error_message=message
    )
    if graded >= judge_run.trials_total:
        every_grade_errored = graded > 0 and errored == graded
        JudgeRun.objects.filter(id=judge_run.id, status__in=LIVE).update(
            status=JudgeRun.Status.FAILED if every_grade_errored else JudgeRun.Status.SUCCEEDED,
            finished_at=timezone.now(),
        )
    judge_run.refresh_from_db()
    return judge_run


def judge_run_cancel(*, judge_run: JudgeRun, by=None, refuse_finished: bool = False) -> bool:
    """Cancel a queued or running judge run (compare-and-set): workers make no further call
    (module docstring), chunks not yet started do nothing. Recounts its progress and
    refreshes ``judge_run``. Returns False when it was already finished or cancelled
    (nothing changes); with ``refuse_finished`` a judge run that had already succeeded or
    failed raises ``DomainError(field="judge_run", code="conflict")`` instead (cancelling a
    cancelled one stays a quiet False)."""
    changed = bool(
        JudgeRun.objects.filter(id=judge_run.id, status__in=LIVE).update(
            status=JudgeRun.Status.CANCELLED,
            finished_at=timezone.now(),
            cancelled_by=by if by is not None and by.is_authenticated else None,
        )
    )
    if changed:
        logger.info("judge run %s cancelled by %s", judge_run.id, getattr(by, "username", None))
    judge_run_progress(judge_run_id=judge_run.id)
    judge_run.refresh_from_db()
    if refuse_finished and not changed and judge_run.status != JudgeRun.Status.CANCELLED:
        raise DomainError(
            f"judge run {judge_run.uuid} has already {judge_run.status}; nothing to cancel",
            field="judge_run",
            code="conflict",
        )
    return changed
