"""Writes for runs, trials and grades: start, execute a chunk, grade, finalize, cancel.

Invariants (DESIGN.md, "Trials are independent tasks with idempotent writes"):
- Every state change is a compare-and-set (``filter(status=...).update(...)``), so a race or
  a redelivered task is a no-op: one trial row per (run, case, attempt), one grade per
  (trial, grader), counters that count each trial once.
- A target failure is an errored trial, never a pass; an errored trial gets no grades.
- A run with any errored trial ends ``failed`` (never ``succeeded``); a cancelled run stays
  cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from evals.grading.graders import GraderSpec, parse_grader_specs, run_grader
from evals.models import Baseline, Case, Grade, Run, Suite, Trial
from evals.runner.targets import CaseInput, TargetConfigError, TargetResult, target_from_config

logger = logging.getLogger(__name__)

# The most trials per case a run may ask for (the start form and run_suite share it).
MAX_TRIALS_PER_CASE = 50
# Calls in flight per chunk when the target does not say (``concurrency`` in its config).
DEFAULT_TARGET_CONCURRENCY = 16
# How long a batch of results may gather before it is written, in seconds.
WRITE_BATCH_WINDOW_S = 0.05


class RunConfigError(ValueError):
    """A run cannot start (bad name, trial count, or a suite without active cases); the
    message names the field."""


def _trial_lease() -> timedelta:
    return timedelta(seconds=settings.ASSAY["TRIAL_LEASE_SECONDS"])


def _chunk_size() -> int:
    return max(1, int(settings.ASSAY["TRIAL_CHUNK_SIZE"]))


def _target_validate(config: dict) -> Any:
    """Build the target once to validate ``config`` (raises ``TargetConfigError``) and release
    it; returns it (for ``kind``/``model``). Built and closed inside one event loop, as the
    target contract asks, on a helper thread if the caller already runs a loop."""

    async def build_and_close() -> Any:
        target = target_from_config(config)
        await target.aclose()
        return target

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(build_and_close())
    box: dict[str, Any] = {}

    def on_thread() -> None:
        try:
            box["target"] = asyncio.run(build_and_close())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = exc

    helper = threading.Thread(target=on_thread)
    helper.start()
    helper.join()
    if "error" in box:
        raise box["error"]
    return box["target"]


def _target_concurrency(target: Any, config: dict) -> int:
    """Calls in flight for one chunk: the target's own ``concurrency`` attribute, else
    ``config["concurrency"]``, else ``DEFAULT_TARGET_CONCURRENCY``."""
    value = getattr(target, "concurrency", None) or config.get("concurrency")
    if value is None and isinstance(config.get("settings"), dict):
        value = config["settings"].get("concurrency")
    try:
        return max(1, int(value)) if value is not None else DEFAULT_TARGET_CONCURRENCY
    except (TypeError, ValueError):
        return DEFAULT_TARGET_CONCURRENCY


def run_start(
    *,
    suite: Suite,
    name: str,
    target: dict,
    graders: list[dict],
    trials_per_case: int,
    source_version: str = "",
    started_by=None,
) -> Run:
    """Start a run: validate, snapshot the configuration, create every trial (queued) and
    enqueue its chunk tasks after commit.

    Trials: one per active case and attempt 1..``trials_per_case``, created with one
    ``bulk_create``; chunks of ``settings.ASSAY["TRIAL_CHUNK_SIZE"]`` trial ids each become one
    ``run_chunk_execute`` task, enqueued with ``transaction.on_commit`` so a worker never sees
    a run that is not yet committed.

    Raises ``TargetConfigError`` (bad target), ``GraderConfigError`` (bad grader set) or
    ``RunConfigError`` (bad name or trial count, no active cases), each naming the field,
    before anything is written.
    """
    if not isinstance(name, str) or not name.strip():
        raise RunConfigError("name: must be a non-empty string")
    if isinstance(trials_per_case, bool) or not isinstance(trials_per_case, int):
        raise RunConfigError("trials_per_case: must be an integer")
    if not 1 <= trials_per_case <= MAX_TRIALS_PER_CASE:
        raise RunConfigError(
            f"trials_per_case: must be from 1 to {MAX_TRIALS_PER_CASE} (got {trials_per_case})"
        )
    if not isinstance(graders, list):
        raise RunConfigError("graders: expected a list of grader specs")
    built = _target_validate(target)
    specs = parse_grader_specs(graders)  # raises GraderConfigError naming the index and field
    if not graders:
        # A run with no grader would "succeed" without a single verdict: never green on
        # nothing (DESIGN.md, principle 2).
        raise RunConfigError("graders: a run needs at least one grader")
    graders = _judge_gating_snapshot(graders, specs)
    case_ids = list(Case.objects.active().filter(suite=suite).values_list("id", flat=True))
    if not case_ids:
        raise RunConfigError(f"suite: {suite.name!r} has no active cases")
    if Run.objects.filter(suite=suite, name=name).exists():
        raise RunConfigError(f"name: a run named {name!r} already exists in suite {suite.name!r}")

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
        )
        Trial.objects.bulk_create(
            Trial(run=run, case_id=case_id, attempt=attempt)
            for case_id in case_ids
            for attempt in range(1, trials_per_case + 1)
        )
        trial_ids = list(
            Trial.objects.filter(run=run)
            .order_by("case_id", "attempt")
            .values_list("id", flat=True)
        )
        for chunk in _chunks(trial_ids, _chunk_size()):
            transaction.on_commit(partial(_chunk_enqueue, run.id, chunk))
    return run


def _judge_gating_snapshot(graders: list[dict], specs: list[GraderSpec]) -> list[dict]:
    """The grader set as stored on the run: a judge spec on an untrusted (provisional) judge
    version is stored with ``gating: false``, so the run's report, list and gate never count
    a provisional verdict; trust is read once, when the run starts."""
    from judges.models import JudgeVersion

    provisional = {
        str(u)
        for u in JudgeVersion.objects.filter(
            uuid__in=[s.config["judge_version"] for s in specs if s.is_judge],
            trusted_at__isnull=True,
        ).values_list("uuid", flat=True)
    }
    return [
        {**raw, "gating": False}
        if spec.is_judge
        and spec.gating
        and str(spec.config["judge_version"]).lower() in provisional
        else raw
        for raw, spec in zip(graders, specs, strict=True)
    ]


def _chunks(ids: list[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


def _chunk_enqueue(run_id: int, trial_ids: list[int]) -> None:
    from evals.tasks import run_chunk_execute

    run_chunk_execute.delay(run_id, trial_ids)


def _trials_claim(*, run_id: int, trial_ids: list[int]) -> list[int]:
    """Claim trials by compare-and-set: queued -> running, or running with an expired lease
    -> running with a new lease. Returns the ids this caller now holds.

    Two statements per chunk: the claimable ids are read with ``select_for_update
    (skip_locked)`` on PostgreSQL (rows another worker is claiming are skipped) — SQLite
    serialises writers for the whole transaction (``transaction_mode=IMMEDIATE``) — then
    updated with the same condition, so a trial is never claimed twice.
    """
    now = timezone.now()
    lease = now + _trial_lease()
    claimable = Q(status=Trial.Status.QUEUED) | Q(
        status=Trial.Status.RUNNING, lease_expires_at__lt=now
    )
    with transaction.atomic():
        candidates = Trial.objects.filter(claimable, id__in=trial_ids, run_id=run_id)
        if connection.features.has_select_for_update_skip_locked:
            candidates = candidates.select_for_update(skip_locked=True)
        claimed = list(candidates.values_list("id", flat=True))
        if claimed:
            Trial.objects.filter(claimable, id__in=claimed).update(
                status=Trial.Status.RUNNING, lease_expires_at=lease, started_at=now
            )
            Run.objects.filter(id=run_id, status=Run.Status.QUEUED).update(
                status=Run.Status.RUNNING, started_at=now
            )
    order = {trial_id: i for i, trial_id in enumerate(trial_ids)}
    return sorted(claimed, key=order.__getitem__)


def _calls_stream(
    *, config: dict, items: list[tuple[int, CaseInput]]
) -> Iterator[list[tuple[int, TargetResult]]]:
    """Call the target for every ``(trial_id, case_input)`` concurrently and yield the
    ``(trial_id, result)`` pairs as they complete, in batches: each batch is every result
    that arrived while the caller was writing the previous one (at least one).

    The calls run on an asyncio loop in a helper thread, bounded by the target's concurrency;
    the caller's thread consumes the queue and writes to the database meanwhile, so results
    are stored one by one, not when the slowest call of the chunk returns. A target that
    raises (it must not) gives an errored result, never a lost trial.

    A batch closes ``WRITE_BATCH_WINDOW_S`` after its first result: each write costs a few
    statements whatever its size, so gathering results for a moment saves CPU the calls
    need (bench/README.md, runner).
    """
    results: queue.Queue = queue.Queue()
    done = object()

    async def call_all() -> None:
        target = target_from_config(config)
        try:
            gate = asyncio.Semaphore(_target_concurrency(target, config))

            async def call_one(trial_id: int, case_input: CaseInput) -> None:
                async with gate:
                    try:
                        result = await target.call(case_input)
                    except Exception as exc:  # noqa: BLE001 - the contract says never raise
                        result = TargetResult(
                            output="", error=f"target raised {type(exc).__name__}: {exc}"
                        )
                results.put((trial_id, result))

            await asyncio.gather(*(call_one(t, c) for t, c in items))
        finally:
            await target.aclose()

    def loop_thread() -> None:
        try:
            asyncio.run(call_all())
        except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
            results.put(exc)
        finally:
            results.put(done)

    thread = threading.Thread(target=loop_thread, name="assay-target-calls", daemon=True)
    thread.start()
    finished = False
    try:
        while not finished:
            batch: list[tuple[int, TargetResult]] = []
            item = results.get()
            window_ends = time.monotonic() + WRITE_BATCH_WINDOW_S
            while True:
                if item is done:
                    finished = True
                    break
                if isinstance(item, BaseException):
                    raise item
                batch.append(item)
                try:
                    item = results.get(timeout=max(0.0, window_ends - time.monotonic()))
                except queue.Empty:
                    break
            if batch:
                yield batch
    finally:
        thread.join()


def _case_input(trial: Trial) -> CaseInput:
    case = trial.case
    return CaseInput(
        key=case.key,
        input=case.input,
        expected=case.expected,
        context=list(case.context or []),
        tags=list(case.tags or []),
        attempt=trial.attempt,
    )


def trial_results_record(
    *,
    run_id: int,
    model: str | None,
    results: list[tuple[int, TargetResult]],
    prices: dict[str, Any] | None = None,
) -> list[int]:
    """Write target results onto running trials and count them on the run, in one transaction;
    returns the ids written.

    Idempotent: only trials still ``running`` are written (read under a row lock on
    PostgreSQL, inside SQLite's writer lock), so a result delivered again changes nothing
    and is not counted. Cost is USD at the model's price (``evals.pricing``), null when the
    price or a token count is unknown, and for errored trials. ``prices`` caches price
    lookups by model name across calls (the runner passes one dict per chunk).
    """
    from evals.runner.pricing import cost_breakdown, price_lookup

    prices = {} if prices is None else prices
    now = timezone.now()
    by_id = dict(results)
    with transaction.atomic():
        running = Trial.objects.filter(id__in=by_id, status=Trial.Status.RUNNING)
        if connection.features.has_select_for_update:
            running = running.select_for_update()
        written = sorted(running.values_list("id", flat=True))
        rows = []
        for trial_id in written:
            result = by_id[trial_id]
            cost = None
            if result.ok:
                name = result.model or model
                if name and name not in prices:
                    prices[name] = price_lookup(name)
                breakdown = cost_breakdown(
                    prices.get(name) if name else None, result.input_tokens, result.output_tokens
                )
                cost = breakdown.total_usd if breakdown else None
            rows.append(
                Trial(
                    id=trial_id,
                    status=Trial.Status.OK if result.ok else Trial.Status.ERROR,
                    output=result.output or "",
                    raw_response=result.raw_response,
                    error_message=result.error or "",
                    latency_ms=result.latency_ms,
                    input_tokens=result.input_tokens,
                    output_tokens=result.output_tokens,
                    cost_usd=cost,
                    finished_at=now,
                    lease_expires_at=None,
                )
            )
        if rows:
            _trial_rows_write(rows)
            errored = sum(1 for row in rows if row.status == Trial.Status.ERROR)
            Run.objects.filter(id=run_id).update(
                trials_finished=F("trials_finished") + len(rows),
                trials_errored=F("trials_errored") + errored,
            )
    return written


RESULT_FIELDS = [
    "status",
    "output",
    "raw_response",
    "error_message",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "finished_at",
    "lease_expires_at",
]


def _trial_rows_write(rows: list[Trial]) -> None:
    """One prepared ``UPDATE ... WHERE id = %s AND status = 'running'`` run with
    ``executemany`` over the rows (the hot path of the runner: ``bulk_update`` spends more
    CPU building its CASE expression than the database spends writing). Values go through
    each field's ``get_db_prep_save``, so JSON, Decimal and datetimes are adapted exactly as
    the ORM would."""
    fields = [Trial._meta.get_field(name) for name in RESULT_FIELDS]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = (
        f"UPDATE {quote(Trial._meta.db_table)} SET {assignments} "
        f"WHERE {quote('id')} = %s AND {quote('status')} = %s"
    )
    params = [
        [field.get_db_prep_save(getattr(row, field.attname), connection) for field in fields]
        + [row.id, Trial.Status.RUNNING.value]
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def trial_result_record(
    *, run_id: int, trial_id: int, model: str | None, result: TargetResult
) -> bool:
    """Write one target result (see ``trial_results_record``); False when it was a no-op."""
    return bool(trial_results_record(run_id=run_id, model=model, results=[(trial_id, result)]))


def _grade_rows(trial: Trial, specs: list[GraderSpec]) -> list[Grade]:
    case_input = _case_input(trial)
    rows = []
    for spec in specs:
        result = run_grader(spec, case=case_input, output=trial.output)
        errored = result.status != "ok" or result.passed is None
        rows.append(
            Grade(
                trial=trial,
                grader=spec.key,
                grader_version=str(spec.version),
                status=Grade.Status.ERROR if errored else Grade.Status.OK,
                passed=None if errored else bool(result.passed),
                score=None if errored else result.score,
                reason=result.reason or ("errored" if errored else ""),
                details=result.details or {},
                gating=spec.gating,
            )
        )
    return rows


def grades_record(*, trials: list[Trial], specs: list[GraderSpec]) -> int:
    """Grade ok trials that have just been written (so have no grades yet) with one insert;
    returns the number of grade rows offered.

    Idempotent: the insert goes through the unique (trial, grader) key with
    ``ignore_conflicts``, so a grade that exists already is kept and not duplicated.
    """
    specs = [spec for spec in specs if not spec.is_judge]  # the judge task grades those
    rows = [row for t in trials if t.status == Trial.Status.OK for row in _grade_rows(t, specs)]
    if rows:
        Grade.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def trial_grade(*, trial: Trial, specs: list[GraderSpec]) -> int:
    """Grade one ok trial with ``specs`` and store one Grade per (trial, grader); returns the
    number of grades created.

    Idempotent: graders that already have a grade on this trial are skipped, and the insert
    goes through the unique (trial, grader) key with ``ignore_conflicts``, so a concurrent
    duplicate is dropped by the database. An errored trial gets no grades (it is errored, not
    failed). ``run_grader`` never raises: a grader that breaks gives an errored grade.
    """
    specs = [spec for spec in specs if not spec.is_judge]  # the judge task grades those
    if trial.status != Trial.Status.OK or not specs:
        return 0
    done = set(Grade.objects.filter(trial=trial).values_list("grader", flat=True))
    todo = [spec for spec in specs if spec.key not in done]
    if not todo:
        return 0
    rows = _grade_rows(trial, todo)
    Grade.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def trial_chunk_execute(*, run_id: int, trial_ids: list[int]) -> None:
    """Execute one chunk of a run's trials: claim, call the target concurrently, write each
    result as it arrives, grade the ok ones with the deterministic graders, enqueue the judge
    rung (``judges.tasks.run_chunk_judge``, after commit) when the grader set has judges,
    then finalize the run.

    Idempotent; safe under redelivery: only trials claimed here by compare-and-set (queued,
    or running with an expired lease) are called; every write is a compare-and-set; grades go
    through the unique (trial, grader) key. A cancelled run's chunk does nothing.
    """
    run = Run.objects.filter(id=run_id).first()
    if run is None or run.status == Run.Status.CANCELLED:
        return
    specs = parse_grader_specs(run.graders or [])
    claimed = _trials_claim(run_id=run_id, trial_ids=trial_ids)
    if claimed:
        trials = {t.id: t for t in Trial.objects.filter(id__in=claimed).select_related("case")}
        items = [(tid, _case_input(trials[tid])) for tid in claimed]
        model = run.model or None
        prices: dict[str, Any] = {}
        for batch in _calls_stream(config=run.target, items=items):
            # Results are written as they arrive; a batch is whatever arrived meanwhile.
            written = set(
                trial_results_record(run_id=run_id, model=model, results=batch, prices=prices)
            )
            graded = []
            for trial_id, result in batch:
                if trial_id in written and result.ok:
                    trial = trials[trial_id]
                    trial.status, trial.output = Trial.Status.OK, result.output or ""
                    graded.append(trial)
            if graded and specs:
                grades_record(trials=graded, specs=specs)
    _chunk_grades_complete(run_id=run_id, trial_ids=trial_ids, specs=specs)
    if any(spec.is_judge for spec in specs):
        # Always enqueued, even on a redelivery that claimed nothing: the judge service skips
        # trials already judged, so a lost judge task is made up here.
        transaction.on_commit(partial(_judge_chunk_enqueue, run_id, trial_ids))
    run_finalize(run_id=run_id)


def _judge_chunk_enqueue(run_id: int, trial_ids: list[int]) -> None:
    from judges.tasks import run_chunk_judge

    run_chunk_judge.delay(run_id, trial_ids)


def _chunk_grades_complete(*, run_id: int, trial_ids: list[int], specs: list[GraderSpec]) -> None:
    """Grade ok trials of the chunk that miss a grade (a worker died between writing the trial
    and grading it); one query when nothing is missing."""
    specs = [spec for spec in specs if not spec.is_judge]
    if not specs:
        return
    missing = (
        Trial.objects.filter(id__in=trial_ids, run_id=run_id, status=Trial.Status.OK)
        .annotate(n_grades=Count("grades", filter=Q(grades__judge_version__isnull=True)))
        .filter(n_grades__lt=len(specs))
        .select_related("case")
    )
    for trial in missing:
        trial_grade(trial=trial, specs=specs)


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
    row = Trial.objects.filter(run_id=run_id).aggregate(
        total=Count("id"),
        queued=Count("id", filter=Q(status=Trial.Status.QUEUED)),
        running=Count("id", filter=Q(status=Trial.Status.RUNNING)),
        ok=Count("id", filter=Q(status=Trial.Status.OK)),
        errored=Count("id", filter=Q(status=Trial.Status.ERROR)),
        cancelled=Count("id", filter=Q(status=Trial.Status.CANCELLED)),
    )
    return TrialCounts(**row)


def run_finalize(*, run_id: int) -> Run:
    """Recount a run's trials and, once none is queued or running, close it.

    ``failed`` when any trial errored or any grade errored (``error_message`` "3 of 60
    trials errored; 2 grade errors"): a grader or judge that broke is a failure of the run,
    never a success. Else ``succeeded``; a cancelled run stays cancelled. A run whose
    grader set has judges stays ``running`` until every ok trial has a grade of every judge
    grader (the judge task finalizes it): a finished run never shows judge grades still to
    come. Idempotent: counters are recounted from the trial rows, and the status change is a
    compare-and-set on a non-terminal status.
    """
    counts = _trial_counts(run_id)
    now = timezone.now()
    if counts.queued or counts.running:
        # Live counters are F() increments made with each trial write; a recount here
        # could race a concurrent write and overwrite it with a stale figure.
        return Run.objects.get(id=run_id)
    if _judge_grading_pending(run_id):
        return Run.objects.get(id=run_id)
    grade_errors = Grade.objects.filter(trial__run_id=run_id, status=Grade.Status.ERROR).count()
    problems = []
    if counts.errored:
        problems.append(f"{counts.errored} of {counts.total} trials errored")
    if grade_errors:
        problems.append(f"{grade_errors} grade error{'s' if grade_errors != 1 else ''}")
    message = "; ".join(problems)
    with transaction.atomic():
        # Nothing is in flight: every trial write has committed, so the recount is exact.
        Run.objects.filter(id=run_id).update(
            trials_finished=counts.ok + counts.errored, trials_errored=counts.errored
        )
        Run.objects.filter(id=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
            status=Run.Status.FAILED if problems else Run.Status.SUCCEEDED,
            error_message=message,
            finished_at=now,
        )
        Run.objects.filter(id=run_id, status=Run.Status.CANCELLED, finished_at__isnull=True).update(
            finished_at=now, error_message=message
        )
    return Run.objects.get(id=run_id)


def _judge_grading_pending(run_id: int) -> bool:
    """True while some ok trial of a running run lacks a grade of a judge grader of its set
    (no query beyond the run's grader set when the set has no judge)."""
    graders = Run.objects.filter(id=run_id).values_list("graders", "status").first()
    if graders is None or graders[1] not in (Run.Status.QUEUED, Run.Status.RUNNING):
        return False
    keys = [g["key"] for g in graders[0] or [] if isinstance(g, dict) and g.get("kind") == "judge"]
    if not keys:
        return False
    ok = Trial.objects.filter(run_id=run_id, status=Trial.Status.OK)
    judged = Grade.objects.filter(trial__in=ok, grader__in=keys).count()
    return judged < ok.count() * len(keys)


def run_cancel(*, run: Run, by=None) -> bool:
    """Cancel a queued or running run (compare-and-set); its queued trials become cancelled,
    running ones finish but the run stays cancelled. Returns False when the run was already
    terminal (nothing changes)."""
    with transaction.atomic():
        changed = Run.objects.filter(
            id=run.id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
        ).update(status=Run.Status.CANCELLED)
        if changed:
            Trial.objects.filter(run_id=run.id, status=Trial.Status.QUEUED).update(
                status=Trial.Status.CANCELLED, finished_at=timezone.now()
            )
    if changed:
        logger.info("run %s cancelled by %s", run.id, getattr(by, "username", None))
    run_finalize(run_id=run.id)
    run.refresh_from_db()
    return bool(changed)


__all__ = [
    "RunConfigError",
    "TargetConfigError",
    "run_cancel",
    "run_finalize",
    "run_start",
    "trial_chunk_execute",
    "grades_record",
    "trial_grade",
    "trial_result_record",
    "trial_results_record",
]


# --- graduation (capability case -> regression suite) ----------------------------------------


class GraduationError(ValueError):
    """A case cannot graduate; the message names the field (``case`` or ``into_suite``)."""


def case_graduate(*, case: Case, into_suite: Suite, by=None, evidence: dict | None = None):
    """Copy a capability case into a regression suite and record a ``Graduation``.

    The copy goes through ``evals.services_cases.case_upsert`` with the same key, input,
    expected, context and tags, so graduating twice reuses the copy (idempotent: one case,
    one ``Graduation`` per (case, regression case)). ``evidence`` (e.g. the runs it passed)
    is stored with the record. Returns the ``Graduation``.

    Raises ``GraduationError`` when ``case`` is retired or not in a capability suite, when
    ``into_suite`` is not a regression suite, or when ``into_suite`` already has an active
    case with this key and different content (graduating must never replace it).
    """
    from evals.cases import case_upsert
    from evals.models import Graduation

    if case.suite.kind != Suite.Kind.CAPABILITY:
        raise GraduationError(f"case: {case.key!r} is not in a capability suite")
    if case.retired_at is not None:
        raise GraduationError(f"case: {case.key!r} is retired")
    if into_suite.kind != Suite.Kind.REGRESSION:
        raise GraduationError(f"into_suite: {into_suite.name!r} is not a regression suite")
    clash = (
        Case.objects.active()
        .filter(suite=into_suite, key=case.key)
        .exclude(content_hash=case.content_hash)
        .exists()
    )
    if clash:
        raise GraduationError(
            f"into_suite: {into_suite.name!r} already has a different case with key {case.key!r}"
        )
    with transaction.atomic():
        copy = case_upsert(
            suite=into_suite,
            key=case.key,
            input=case.input,
            expected=case.expected,
            context=list(case.context or []),
            tags=list(case.tags or []),
        )
        graduation, _ = Graduation.objects.get_or_create(
            case=case, regression_case=copy, defaults={"by": by, "evidence": evidence or {}}
        )
    return graduation


# --- baselines ----------------------------------------------------------------------------


def baseline_set(*, suite: Suite, run: Run, by=None, note: str = "") -> Baseline:
    """Make ``run`` the current baseline of ``suite``: a new ``Baseline`` row, so the history
    of who set which baseline and when is kept (the latest row is current).

    Raises ``ValueError`` naming the field: ``run`` must belong to ``suite`` and pass
    ``baseline_refusal`` (finished, not cancelled, at least one graded trial); ``note`` at
    most 500 characters.
    """
    if run.suite_id != suite.id:
        raise ValueError(f"run: {run.name!r} belongs to another suite, not {suite.name!r}")
    from evals.suites import baseline_refusal

    refusal = baseline_refusal(run=run)
    if refusal:
        raise ValueError(refusal)
    if len(note) > 500:
        raise ValueError("note: at most 500 characters")
    user = by if by is not None and getattr(by, "is_authenticated", False) else None
    return Baseline.objects.create(suite=suite, run=run, set_by=user, note=note)
