"""Executing a chunk of a run's trials: claim them by compare-and-set, call the target
concurrently, write each result as it arrives (cost from the price table, null when
unknown), grade the ok ones with the deterministic rungs, enqueue the judge rung after
commit, and finalize the run.

Invariants (DESIGN.md, "Trials are independent tasks with idempotent writes"): every state
change is a compare-and-set, so a race or a redelivered task is a no-op; a target failure
is an errored trial, never a pass; an errored trial gets no grades."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from evals.grading.ladder import (
    _case_input,
    _chunk_grades_complete,
    grades_record,
)
from evals.models import Run, Trial
from evals.runner.finalize import (
    run_finalize,
)
from evals.runner.pricing import cost_breakdown, price_lookup
from evals.runner.targets import CaseInput, TargetResult, target_from_config
from judges.tasks import run_chunk_judge

# Calls in flight per chunk when the target does not say (``concurrency`` in its config).
DEFAULT_TARGET_CONCURRENCY = 16


# How long a batch of results may gather before it is written, in seconds.
WRITE_BATCH_WINDOW_S = 0.05


def _trial_lease() -> timedelta:
    return timedelta(seconds=settings.ASSAY["TRIAL_LEASE_SECONDS"])


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
    and is not counted. Cost is USD at the model's price (``evals.runner.pricing``), null when the
    price or a token count is unknown, and for errored trials. ``prices`` caches price
    lookups by model name across calls (the runner passes one dict per chunk).
    """

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
    specs = list(run.grader_set.specs)
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

    run_chunk_judge.delay(run_id, trial_ids)
