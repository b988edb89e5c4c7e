"""Judge runs: one judge version grading (a sample of) a finished run's ok trials, in
chunk tasks enqueued after commit, with progress recounted from the grade rows and a
cancel that stops further chunks."""

from __future__ import annotations

import random

from django.db import transaction
from django.utils import timezone

from core.chunks import chunked
from core.errors import DomainError
from evals.models import Grade, Run, Trial
from judges import tasks
from judges.grading import Sleep, judge_grade_trials
from judges.models import Judge, JudgeRun, JudgeVersion

JUDGE_RUN_CHUNK = 50


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
        raise DomainError(
            f"a {judge_version.judge.kind} judge does not grade single trials",
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
            judge_version=judge_version,
            defaults={"grader": judge_version.grader_key},
        )
        judge_run.status = JudgeRun.Status.QUEUED
        judge_run.trial_ids = ids
        judge_run.trials_total = len(ids)
        judge_run.started_by = by
        judge_run.finished_at = None
        judge_run.save()
        chunks = chunked(ids, JUDGE_RUN_CHUNK)
        for chunk in chunks or [[]]:
            transaction.on_commit(
                lambda c=chunk: tasks.judge_run_execute.delay(run.id, judge_version.id, c)
            )
    return judge_run


def judge_run_execute(
    *, run_id: int, judge_version_id: int, trial_ids: list[int], sleep: Sleep | None = None
) -> None:
    """Grade one chunk of a judge run, then recount its progress.

    Idempotent; safe under redelivery (grades keyed by (trial, grader)). A cancelled judge
    run does nothing.
    """
    judge_run = (
        JudgeRun.objects.filter(run_id=run_id, judge_version_id=judge_version_id)
        .select_related("judge_version__judge")
        .first()
    )
    if judge_run is None or judge_run.status == JudgeRun.Status.CANCELLED:
        return
    JudgeRun.objects.filter(id=judge_run.id, status=JudgeRun.Status.QUEUED).update(
        status=JudgeRun.Status.RUNNING
    )
    trials = list(Trial.objects.filter(id__in=trial_ids, run_id=run_id).select_related("case"))
    judge_grade_trials(
        trials=trials, judge_version=judge_run.judge_version, grader=judge_run.grader, sleep=sleep
    )
    judge_run_progress(judge_run_id=judge_run.id)


def judge_run_progress(*, judge_run_id: int) -> JudgeRun:
    """Recount graded and errored trials from the grade rows; close the judge run once every
    trial has a grade (compare-and-set: a cancelled run stays cancelled)."""
    judge_run = JudgeRun.objects.get(id=judge_run_id)
    grades = Grade.objects.filter(trial_id__in=judge_run.trial_ids, grader=judge_run.grader)
    graded = grades.count()
    errored = grades.filter(status=Grade.Status.ERROR).count()
    JudgeRun.objects.filter(id=judge_run.id).update(trials_graded=graded, trials_errored=errored)
    if graded >= judge_run.trials_total:
        JudgeRun.objects.filter(id=judge_run.id).exclude(status__in=JudgeRun.TERMINAL).update(
            status=JudgeRun.Status.SUCCEEDED, finished_at=timezone.now()
        )
    judge_run.refresh_from_db()
    return judge_run


def judge_run_cancel(*, judge_run: JudgeRun) -> bool:
    """Cancel a judge run not yet finished; chunks not yet started then do nothing.
    Returns False when it was already terminal."""
    return bool(
        JudgeRun.objects.filter(id=judge_run.id)
        .exclude(status__in=JudgeRun.TERMINAL)
        .update(status=JudgeRun.Status.CANCELLED, finished_at=timezone.now())
    )
