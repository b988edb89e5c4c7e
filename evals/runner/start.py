"""Writes for runs, trials and grades: start, execute a chunk, grade, finalize, cancel.

Invariants (DESIGN.md, "Trials are independent tasks with idempotent writes"): every
state change is a compare-and-set, so a race or a redelivered task is a no-op; a target
failure is an errored trial, never a pass, and gets no grades; a run with an errored trial
ends ``failed``; a cancelled run stays cancelled."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from core.chunks import chunked
from core.errors import DomainError
from core.outbox import outbox_enqueue_many, outbox_unsent
from core.text import unstorable_refuse
from evals.grading.grader_config import grader_set_resolved, parse_grader_specs
from evals.grading.grader_set import GraderSpec
from evals.grading.rungs import judge_rung_required
from evals.models import Case, Run, Suite, Trial
from evals.runner.queued_trials import queued_trials_insert
from evals.runner.replay import run_replay_refusal
from evals.runner.targets.base import DEFAULT_CONCURRENCY, concurrency_read, target_validate
from evals.tasks import run_chunk_execute

logger = logging.getLogger(__name__)

# The most trials per case a run may ask for (the start form and run_suite share it).
MAX_TRIALS_PER_CASE = 50
# Trials per case when none is given: the same on the form, the command line and the API.
DEFAULT_TRIALS_PER_CASE = 5
SOURCE_VERSION_MAX = 200  # Run.source_version: a commit, a tag, a version name


def trial_chunk_size(concurrency: int = 0) -> int:
    """Trials per execution task: ``ASSAY["TRIAL_CHUNK_SIZE"]``, or the target's ``concurrency``
    when larger, so one chunk message fills the call pool by itself."""
    return max(int(settings.ASSAY["TRIAL_CHUNK_SIZE"]), concurrency)


def run_name_default(*, suite: Suite) -> str:
    """A name for a run started without one: ``run-YYYYMMDD-HHMMSS`` (UTC), with ``-2``, ``-3``, ...
    when ``suite`` already has it. One query."""
    base = timezone.now().strftime("run-%Y%m%d-%H%M%S")
    taken = set(
        Run.objects.filter(suite=suite, name__startswith=base).values_list("name", flat=True)
    )
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def run_start(
    *,
    suite: Suite,
    name: str,
    target: dict,
    graders: list[dict],
    trials_per_case: int,
    source_version: str = "",
    started_by=None,
    against: Run | None = None,
) -> Run:
    """Start a run: validate, snapshot the configuration, create every trial (queued) and enqueue
    its chunk tasks after commit.

    One trial per active case and attempt 1..``trials_per_case``, in one statement; chunks of
    ``trial_chunk_size`` become ``run_chunk_execute`` messages in the outbox (``core.outbox``),
    committed with the run and sent after commit, so a worker never sees a partial run and a
    broker outage only delays it (``run_publish_warning``). Queries do not grow with cases.

    ``against``: an adaptive run that adds trials only to cases still uncertain against this
    succeeded, replayable run of the same suite (``evals.comparison.topup``), up to 4N.

    Raises ``DomainError`` naming the field before anything is written: a bad target, grader
    set, name or trial count, unstorable text, a ``source_version`` over 200 characters, no
    active cases, an ``against`` that cannot serve. Long: the checks must all precede the
    single write transaction."""
    if not isinstance(name, str) or not name.strip():
        raise DomainError("must be a non-empty string", field="name")
    if isinstance(trials_per_case, bool) or not isinstance(trials_per_case, int):
        raise DomainError("must be an integer", field="trials_per_case")
    if not 1 <= trials_per_case <= MAX_TRIALS_PER_CASE:
        raise DomainError(
            f"must be from 1 to {MAX_TRIALS_PER_CASE} (got {trials_per_case})",
            field="trials_per_case",
        )
    if not isinstance(graders, list):
        raise DomainError("expected a list of grader specs", field="graders")
    if not isinstance(source_version, str) or len(source_version) > SOURCE_VERSION_MAX:
        raise DomainError(
            f"must be a string of at most {SOURCE_VERSION_MAX} characters", field="source_version"
        )
    for field, value in (
        ("name", name),
        ("source_version", source_version),
        ("target", target),
        ("graders", graders),
    ):
        unstorable_refuse(value, field=field)  # names the path: target.model, graders[0].key
    built = target_validate(target)
    specs = parse_grader_specs(graders)  # raises DomainError naming the index and field
    if not graders:
        # A run with no grader would "succeed" without a single verdict: never green on
        # nothing (DESIGN.md, principle 2).
        raise DomainError("a run needs at least one grader", field="graders")
    _judge_templates_check(specs)
    graders = _judge_gating_snapshot(grader_set_resolved(graders, specs), specs)
    case_ids = list(Case.objects.active().filter(suite=suite).values_list("id", flat=True))
    if not case_ids:
        raise DomainError(f"{suite.name!r} has no active cases", field="suite")
    if against is not None:
        if against.suite_id != suite.id:
            raise DomainError(f"run {against.name!r} is of another suite", field="against")
        refusal = run_replay_refusal(run=against)
        if refusal:
            raise DomainError(refusal, field="against")
    taken = DomainError(
        f"a run named {name!r} already exists in suite {suite.name!r}", field="name"
    )
    if Run.objects.filter(suite=suite, name=name).exists():
        raise taken
    try:
        return _run_create(
            suite=suite,
            name=name,
            target=target,
            built=built,
            graders=graders,
            source_version=source_version,
            trials_per_case=trials_per_case,
            started_by=started_by,
            against=against,
            case_ids=case_ids,
        )
    except IntegrityError as exc:
        # Two requests with one name (a double submit) both passed the check above: the
        # unique (suite, name) lets one in, and the other is the same 400, not a 500.
        if Run.objects.filter(suite=suite, name=name).exists():
            raise taken from exc
        raise


def _run_create(
    *,
    suite: Suite,
    name: str,
    target: dict,
    built,
    graders: list[dict],
    source_version: str,
    trials_per_case: int,
    started_by,
    against: Run | None,
    case_ids: list[int],
) -> Run:
    """The run, its trials and chunk messages in one transaction (a savepoint when the caller
    holds one). Raises ``IntegrityError`` when another run took the name meanwhile."""
    with transaction.atomic():
        run = Run.objects.create(
            suite=suite,
            name=name,
            source=Run.Source.EXECUTED,
            target_kind=str(target.get("kind", "")),
            model=str(target.get("model") or getattr(built, "model", None) or ""),
            target=target,
            graders=graders,
            source_version=source_version,
            trials_per_case=trials_per_case,
            status=Run.Status.QUEUED,
            trials_total=len(case_ids) * trials_per_case,
            started_by=started_by,
            against=against,
        )
        trial_ids = queued_trials_insert(
            run_id=run.id, case_ids=case_ids, trials_per_case=trials_per_case
        )
        size = trial_chunk_size(built.concurrency)
        _chunks_enqueue(run.id, chunked(trial_ids, size))
    return run


def _judge_templates_check(specs: list[GraderSpec]) -> None:
    """Refuse a judge spec whose version could not grade (its stored template would be
    refused when grading: ``JudgeRung.version_start_check``), so the run does not start only
    to error every judge grade."""
    for index, spec in enumerate(specs):
        if not spec.is_judge:
            continue
        judge_rung_required().version_start_check(
            version_uuid=spec.config["judge_version"],
            field=f"graders[{index}].config.judge_version",
        )


def _judge_gating_snapshot(graders: list[dict], specs: list[GraderSpec]) -> list[dict]:
    """The grader set as stored on the run: a judge on an untrusted version is stored
    ``gating: false``, so no report or gate counts a provisional verdict. Trust is read once."""

    judged = [s.config["judge_version"] for s in specs if s.is_judge]
    provisional = (
        judge_rung_required().versions_untrusted(version_uuids=judged) if judged else set()
    )
    return [
        {**raw, "gating": False}
        if spec.is_judge
        and spec.gating
        and str(spec.config["judge_version"]).lower() in provisional
        else raw
        for raw, spec in zip(graders, specs, strict=True)
    ]


def run_subject(run_id: int) -> str:
    """The outbox subject of a run's messages (its chunks and its judge rung)."""
    return f"evals.run:{run_id}"


def _chunks_enqueue(run_id: int, chunks: list[list[int]]) -> None:
    """A ``run_chunk_execute`` message per chunk of trial ids, written in the caller's
    transaction with one insert and sent after commit in their order, the first chunk
    first (``core.outbox.outbox_enqueue_many``)."""
    outbox_enqueue_many(
        run_chunk_execute, [(run_id, ids) for ids in chunks], subject=run_subject(run_id)
    )


PUBLISH_DELAYED = (
    "the task broker is unreachable: the run is saved and will start by itself once the "
    "broker is back ({count} task message(s) waiting)"
)


def run_publish_warning(*, run: Run) -> str:
    """A warning for the surfaces when some of ``run``'s task messages are still unsent
    (the broker refused them; the sweeper sends them once it is back); "" when none is."""
    count = outbox_unsent(subject=run_subject(run.id))
    return PUBLISH_DELAYED.format(count=count) if count else ""


def _stored_concurrency(target: dict) -> int:
    """A stored target's calls in flight, for sizing chunks only (never a refusal of a snapshot
    its kind accepted), else ``DEFAULT_CONCURRENCY``."""
    try:
        return concurrency_read(target)
    except DomainError:
        return DEFAULT_CONCURRENCY


def trials_add(
    *,
    run: Run,
    per_case: dict[int, int],
    top_up=None,
    top_up_round: int | None = None,
) -> list[int]:
    """Add trials to a finished run and enqueue them after commit: ``per_case`` maps a case id to
    its new attempts (numbered after its last), marked ``top_up``/``top_up_round`` for a top-up.
    The run goes back to ``running`` (compare-and-set) and is finalized again. Returns the new
    trial ids in (case id, attempt) order. Raises ``DomainError`` for a run not finished."""
    per_case = {c: n for c, n in per_case.items() if n > 0}
    if not per_case:
        return []
    with transaction.atomic():
        reopened = Run.objects.filter(
            id=run.id, status__in=[Run.Status.SUCCEEDED, Run.Status.FAILED]
        ).update(status=Run.Status.RUNNING, finished_at=None)
        if not reopened:
            raise DomainError(
                f"run {run.name!r} is not finished (or was cancelled): no trial can be added",
                field="run",
            )
        last = dict(
            Trial.objects.filter(run=run, case_id__in=per_case)
            .values("case_id")
            .annotate(top=Max("attempt"))
            .values_list("case_id", "top")
        )
        new = [
            Trial(
                run=run,
                case_id=case_id,
                attempt=last.get(case_id, 0) + k,
                top_up=top_up,
                top_up_round=top_up_round,
            )
            for case_id, n in sorted(per_case.items())
            for k in range(1, n + 1)
        ]
        Trial.objects.bulk_create(new)
        ids = list(
            Trial.objects.filter(run=run, case_id__in=per_case, status=Trial.Status.QUEUED)
            .order_by("case_id", "attempt")
            .values_list("id", "case_id", "attempt")
        )
        fresh = {(t.case_id, t.attempt) for t in new}
        trial_ids = [tid for tid, cid, att in ids if (cid, att) in fresh]
        Run.objects.filter(id=run.id).update(trials_total=F("trials_total") + len(trial_ids))
        size = trial_chunk_size(_stored_concurrency(run.target))
        _chunks_enqueue(run.id, chunked(trial_ids, size))
    return trial_ids
