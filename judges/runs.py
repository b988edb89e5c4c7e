"""Judge runs: one judge version grading (a sample of) a finished run's ok trials in chunk
tasks, with progress recounted from the grade rows and a cancel that stops further paid calls.

- A chunk's calls go out ``concurrency`` at a time (``judges.calling.calls_send``); before
  each call the worker re-reads the judge run's status (``_job_checkpoint``). A cancel takes
  effect between calls: those in flight finish and are recorded (grades, ``judges.ledger``),
  nothing new starts. Each call is claimed first (``judges.claims``).
- Progress (graded / to grade) is recounted at most every ``PROGRESS_EVERY_S`` (1 s) and at
  the chunk's end, so a fast endpoint does not pay a query per call.
- A pairwise judge run is the same job on (head, base) pairs judged in both presentation
  orders (``judges.pairwise``): graded = both orders stored, errored = an order without a
  verdict.
- The end (``judge_run_progress``): ``failed`` when every grade errored, else ``succeeded``,
  ``error_message`` counting the errors by reason; a cancelled run stays cancelled. A first
  wave refused whole for a parameter (``rejected_parameter``) fails the judge run there,
  its other trials never called.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from core.actors import actor_text, via_of
from core.chunks import chunked
from core.errors import DomainError
from core.outbox import outbox_enqueue
from evals.grading.grader_set import RECORDED_JUDGE_KIND, recorded_kind_reason
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
    """Grade ``run``'s ok trials (all, or a random ``sample``, reproducible with ``seed``) with
    ``judge_version`` in chunks of ``JUDGE_RUN_CHUNK`` trials. Raises ``DomainError`` naming the
    field for a bad sample size, or for a pairwise or recorded judge version."""

    if judge_version.judge.kind == Judge.Kind.RECORDED:
        raise DomainError(
            f"{judge_version} is {recorded_kind_reason(RECORDED_JUDGE_KIND)}",
            field="judge_version",
        )
    if judge_version.judge.kind == Judge.Kind.PAIRWISE:
        raise DomainError(
            "a pairwise judge does not grade single trials: it compares two runs "
            "(pairwise_judge_run_start; judge_run --pairwise BASE)",
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
    """Judge every (case, attempt) ok in both ``head`` and ``base`` with a pairwise
    ``judge_version``, in both orders, in chunks of ``JUDGE_RUN_CHUNK`` pairs. Starting again
    reuses the (head, base, version) judge run; stored presentations are not called again.

    Raises ``DomainError`` naming the field: ``judge_version`` when it is not pairwise;
    ``base_run``/``head_run`` when a run is still queued or running; ``head_run`` when the
    runs are one run, of two suites, or share no ok (case, attempt)."""
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
    """Judge one chunk of a pairwise judge run, as ``judge_run_execute`` does. Idempotent: each
    presentation is claimed before its call, verdicts keyed by (pair, judge version, position)."""
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
    checkpoint = _job_checkpoint(judge_run.id)
    if pairs and checkpoint():
        pairs_judge(
            pairs=pairs,
            judge_version=judge_run.judge_version,
            sleep=sleep,
            checkpoint=checkpoint,
            judge_run_id=judge_run.id,
        )
    judge_run_progress(judge_run_id=judge_run.id)


def _job_checkpoint(judge_run_id: int) -> Callable[[], bool]:
    """Before each paid call: recount progress when ``PROGRESS_EVERY_S`` has passed, then go on
    only while the judge run is live."""
    counted = time.monotonic()

    def checkpoint() -> bool:
        nonlocal counted
        if time.monotonic() - counted >= PROGRESS_EVERY_S:
            judge_run_progress(judge_run_id=judge_run_id)
            counted = time.monotonic()
        if judge_run_live(judge_run_id=judge_run_id):
            return True
        uuid = JudgeRun.objects.filter(id=judge_run_id).values_list("uuid", flat=True).first()
        logger.info("judge run %s is no longer live: no further calls", uuid or "(deleted)")
        return False

    return checkpoint


def _chunk_refusal(judge_run: JudgeRun, trials: list[Trial]) -> str | None:
    """The provider's words when every grade of ``trials`` is an errored ``rejected_parameter``,
    else None."""
    rows = list(
        Grade.objects.filter(trial__in=trials, grader=judge_run.grader).values_list(
            "status", "reason", "details"
        )
    )
    if not rows or any(
        status != Grade.Status.ERROR or reason != "rejected_parameter" for status, reason, _ in rows
    ):
        return None
    return str(rows[0][2].get("provider_message") or "rejected_parameter")


def _judge_run_refused(judge_run: JudgeRun, refusal: str) -> None:
    """Recount, then mark the judge run ``failed`` naming the model and the parameter the provider
    refuses. A compare-and-set from queued, running or the recount's ``failed`` (never over a
    cancel)."""
    judge_run_progress(judge_run_id=judge_run.id)
    JudgeRun.objects.filter(id=judge_run.id, status__in=[*LIVE, JudgeRun.Status.FAILED]).update(
        status=JudgeRun.Status.FAILED,
        finished_at=timezone.now(),
        error_message=f"stopped: the provider refuses a parameter ({refusal[:300]}); "
        "no further calls were made",
    )


def judge_run_live(*, judge_run_id: int) -> bool:
    """True while the judge run is queued or running: checked before each paid call."""
    return JudgeRun.objects.filter(id=judge_run_id, status__in=LIVE).exists()


def judge_run_execute(
    *, run_id: int, judge_version_id: int, trial_ids: list[int], sleep: Sleep | None = None
) -> None:
    """Grade one chunk of a judge run (module docstring). Idempotent under redelivery and
    duplicates: each (trial, grader) is claimed before its call, grades are keyed by (trial,
    grader). A cancelled or finished judge run does nothing."""
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
    checkpoint = _job_checkpoint(judge_run.id)
    if trials and checkpoint():
        judge_grade_trials(
            trials=trials,
            judge_version=judge_run.judge_version,
            grader=judge_run.grader,
            sleep=sleep,
            checkpoint=checkpoint,
            judge_run_id=judge_run.id,
        )
        # A chunk whose every call the provider refused for a parameter stops the job here
        # instead of paying for calls the provider will refuse.
        refused = _chunk_refusal(judge_run, trials)
        if refused:
            _judge_run_refused(judge_run, refused)
            return
    judge_run_progress(judge_run_id=judge_run.id)


def _errors_text(reasons: Counter, errored: int, graded: int, *, pairs: bool = False) -> str:
    """How many grades (pairwise: pairs) errored and why, most frequent reasons first; empty
    when none did."""
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
    """(pairs with both orders stored, pairs with an errored order, reasons of the errored
    presentations)."""
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
    """Recount graded and errored trials (pairwise: pairs) and, once every trial has a grade,
    close the judge run (module docstring); a compare-and-set from queued or running."""
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


def judge_run_cancel(
    *, judge_run: JudgeRun, by=None, via: str | None = None, refuse_finished: bool = False
) -> bool:
    """Cancel a queued or running judge run (compare-and-set) and recount its progress. ``by``
    and ``via`` (``core.actors.Via``; None: a page for a user, else the system) are stored and
    logged. Returns False when it was already finished or cancelled; with ``refuse_finished``
    a succeeded or failed one raises ``DomainError(field="judge_run", code="conflict")``."""
    user = by if by is not None and by.is_authenticated else None
    changed = bool(
        JudgeRun.objects.filter(id=judge_run.id, status__in=LIVE).update(
            status=JudgeRun.Status.CANCELLED,
            finished_at=timezone.now(),
            cancelled_by=user,
            cancelled_via=via_of(user, via),
        )
    )
    if changed:
        logger.info("judge run %s cancelled %s", judge_run.uuid, actor_text(by=user, via=via))
    judge_run_progress(judge_run_id=judge_run.id)
    judge_run.refresh_from_db()
    if refuse_finished and not changed and judge_run.status != JudgeRun.Status.CANCELLED:
        raise DomainError(
            f"judge run {judge_run.uuid} has already {judge_run.status}; nothing to cancel",
            field="judge_run",
            code="conflict",
        )
    return changed
