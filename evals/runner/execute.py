"""Executing a chunk of a run's trials: claim them, call the target concurrently, write and
grade each result as it arrives, enqueue the judge rung after commit, finalize the run.
Every state change is a compare-and-set, so a race or a redelivered task is a no-op
(DESIGN.md, "Trials are independent tasks with idempotent writes")."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Field
from django.utils import timezone

from core.chunks import chunked
from core.db import model_field, sql_marks
from core.logs import log_context
from evals.grading.ladder import (
    _chunk_grades_complete,
    grades_insert,
)
from evals.grading.rungs import judge_rung_required
from evals.metrics import trials_finished_count
from evals.models import Run, TopUp, Trial
from evals.runner.calls import CallPool
from evals.runner.claims import (
    Held,
    leases_renew,
    trials_claim,
    trials_claim_next,
    trials_claimable,
    trials_held,
    trials_release,
)
from evals.runner.finalize import run_close_if_done, trials_cancel
from evals.runner.start import _chunks_enqueue, run_subject, trial_chunk_size
from evals.runner.targets import TargetResult
from providers.call_stop import CANCELLED_KIND
from providers.pricing import price_lookup, usage_cost
from providers.usage import usage_of

logger = logging.getLogger(__name__)

# While no result arrives, the chunk still looks at its run (cancelled?) this often, seconds.
STOP_CHECK_S = 0.5

# Results are written once the first of them has waited this long (or no call is left
# outstanding), seconds: each write costs a few statements whatever its size, and a worker
# sharing a run's calls with three others gets a quarter of its results (bench/README.md,
# "Four workers"). The run's status is read with every gathering of results
# (``calls.WRITE_BATCH_WINDOW_S``), so a cancel is seen as soon as before.
WRITE_EVERY_S = 0.1

# How long a chunk, once it has claimed all its own trials, goes on claiming the queued
# trials of its run (those other chunk messages carry), seconds: the worker keeps the run's
# concurrency in flight instead of draining its pipeline at the end of every chunk. Bounded,
# so a chunk ends (its judge rung is enqueued, other runs' messages get their turn) at least
# this often, and well inside Celery's task time limits.
CHUNK_EXTEND_S = 60.0

# A trial's ``cost_basis`` when the target stated its own cost.
TARGET_BASIS = {"source": "target"}

# After a lost database connection, how long the chunk tries to reconnect before it gives up
# (its trials are then taken back by the sweeper once their lease runs out), seconds.
DB_RECONNECT_S = 30.0


def trial_results_record(
    *,
    run_id: int,
    model: str | None,
    results: list[tuple[int, TargetResult]],
    prices: dict[str, Any] | None = None,
) -> list[int]:
    """Write target results onto running trials and count them on the run, in one transaction;
    returns the ids written.

    Idempotent: only trials still ``running`` are written, so a redelivered result is not
    counted. Cost is the target's own (``TargetResult.cost_usd``), else USD for the token classes at
    the model's price (``providers.pricing.usage_cost``), null when unknown and for errored trials;
    ``cost_basis`` says which (``TARGET_BASIS``, ``Costing.basis``). ``prices`` caches lookups by
    model across calls. Three SQL statements (the runner's hot path: ``evals.runner.claims``)."""

    prices = {} if prices is None else prices
    now = timezone.now()
    by_id = dict(results)
    trials, runs, quote = Trial._meta.db_table, Run._meta.db_table, connection.ops.quote_name
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    # savepoint=False: inside the chunk's write (its grades commit with it) a savepoint
    # would cost two more round trips; alone, this is the transaction.
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('id')} FROM {quote(trials)} WHERE {quote('id')} IN "
            f"({sql_marks(by_id)}) AND {quote('status')} = %s{lock}",
            [*by_id, Trial.Status.RUNNING.value],
        )
        written = sorted(row[0] for row in cursor.fetchall())
        rows = []
        for trial_id in written:
            result = by_id[trial_id]
            cost, basis = None, None
            if result.ok and result.cost_usd is not None:  # the target's own account
                cost, basis = result.cost_usd, TARGET_BASIS
            elif result.ok:
                name = result.model or model
                if name and name not in prices:
                    prices[name] = price_lookup(name)
                costing = usage_cost(
                    prices.get(name) if name else None, usage_of(result), model=name
                )
                cost, basis = costing.total_usd, costing.basis()
            rows.append(
                (
                    trial_id,
                    (
                        (Trial.Status.OK if result.ok else Trial.Status.ERROR).value,
                        result.output or "",
                        result.raw_response,
                        result.request,
                        result.trajectory,
                        result.final_state,
                        result.error or "",
                        result.latency_ms,
                        result.input_tokens,
                        result.output_tokens,
                        result.cache_write_tokens,
                        result.cache_read_tokens,
                        result.reasoning_tokens,
                        cost,
                        basis,
                        now,
                        None,
                    ),
                )
            )
        if rows:
            _trial_rows_write(rows)
            errored = sum(1 for row in rows if row[1][0] == Trial.Status.ERROR)
            trials_finished_count(ok=len(rows) - errored, error=errored)
            cursor.execute(
                f"UPDATE {quote(runs)} SET {quote('trials_finished')} = "
                f"{quote('trials_finished')} + %s, {quote('trials_errored')} = "
                f"{quote('trials_errored')} + %s WHERE {quote('id')} = %s",
                [len(rows), errored, run_id],
            )
    return written


RESULT_FIELDS = [
    "status",
    "output",
    "raw_response",
    "request",
    "trajectory",
    "final_state",
    "error_message",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "cost_usd",
    "cost_basis",
    "finished_at",
    "lease_expires_at",
]


# Fields whose Python value is the database value (``get_db_prep_save`` returns it as
# given): their values skip the per-value field call on the hot path.
_PLAIN_FIELDS = (
    "CharField",
    "TextField",
    "FloatField",
    "IntegerField",
    "PositiveIntegerField",
    "PositiveSmallIntegerField",
)


def _field_adapter(field: Field) -> Callable[[Any], Any] | None:
    """None when ``field``'s values go to the database as they are (``_PLAIN_FIELDS``,
    exact classes only: a subclass may adapt), else the field's ``get_db_prep_save`` bound
    to the connection (JSON, Decimal, datetimes)."""
    if type(field).__name__ in _PLAIN_FIELDS and type(field).__module__.startswith(
        "django.db.models.fields"
    ):
        return None
    return functools.partial(field.get_db_prep_save, connection=connection)


def _trial_rows_write(rows: list[tuple[int, tuple]]) -> None:
    """One prepared ``UPDATE ... WHERE id = %s AND status = 'running'`` over ``executemany`` rows
    (``bulk_update``'s CASE costs more CPU than the write). JSON, Decimal and datetime values go
    through their field's ``get_db_prep_save``, as the ORM would adapt them."""
    fields = [model_field(Trial, name, Field) for name in RESULT_FIELDS]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = (
        f"UPDATE {quote(Trial._meta.db_table)} SET {assignments} "
        f"WHERE {quote('id')} = %s AND {quote('status')} = %s"
    )
    adapters = [_field_adapter(field) for field in fields]
    running = Trial.Status.RUNNING.value
    params = [
        [
            value if adapt is None or value is None else adapt(value)
            for adapt, value in zip(adapters, values, strict=True)
        ]
        + [trial_id, running]
        for trial_id, values in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _stopped(run_id: int, top_up_ids: set[int]) -> tuple[bool, set[int]]:
    """(is the run cancelled or gone, ids of the cancelled top-ups among ``top_up_ids``): one
    query (in SQL: it runs with every batch of results), two when the chunk holds top-up
    trials."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('status')} FROM {quote(Run._meta.db_table)} WHERE {quote('id')} = %s",
            [run_id],
        )
        row = cursor.fetchone()
    cancelled_top_ups = (
        set(
            TopUp.objects.filter(id__in=top_up_ids, status=TopUp.Status.CANCELLED).values_list(
                "id", flat=True
            )
        )
        if top_up_ids
        else set()
    )
    return row is None or row[0] == Run.Status.CANCELLED, cancelled_top_ups


def _database_reconnect(budget_s: float = DB_RECONNECT_S) -> bool:
    """Reconnect, retrying with backoff for ``budget_s`` seconds; whether the database answers."""
    deadline = time.monotonic() + budget_s
    delay = 0.1
    while True:
        with contextlib.suppress(DatabaseError):
            connection.close()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except DatabaseError:
            if time.monotonic() + delay > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


class _ChunkCalls:
    """The calls of one chunk: claims trials a few at a time (at most twice the pool's concurrency
    ahead), writes and grades results as they arrive, renews its leases, and stops starting
    calls once its run or top-up is cancelled or a write fails. With its own trials claimed it
    takes the run's other queued trials for ``CHUNK_EXTEND_S``, so the pool stays full across
    chunk boundaries."""

    def __init__(
        self, *, run: Run, trial_ids: list[int], pool: CallPool, extend_s: float = 0.0
    ) -> None:
        self.run_id = run.id
        # Once the run runs, a claim need not move it from queued (one statement less).
        self.run_started = run.status != Run.Status.QUEUED
        self.run_ref = run.ref_text  # how the log names it: a failed write allows no query
        self.model = run.model or None
        self.specs = list(run.grader_set.specs)
        self.pool = pool
        self.pending = list(trial_ids)  # not yet offered to the claim
        self.held: dict[int, Held] = {}  # claimed by this chunk, result not yet written
        self.settled: set[int] = set()  # written here, and graded when ok
        self.judged = any(spec.is_judge for spec in self.specs)
        self.to_judge: list[int] = []  # ok trials written here, judge rung not yet enqueued
        # ... and those whose judge rung is enqueued, or that need none (errored)
        self.judge_sent: set[int] = set()
        self.extend_until = time.monotonic() + extend_s
        self.prices: dict[str, Any] = {}
        self.unwritten: list[tuple[int, TargetResult]] = []  # paid for, not yet written
        self.unwritten_since = 0.0
        self.run_cancelled = False
        # Calls in flight told to stop (``CallPool.stop``) -> whether their trial leaves the
        # run's count when it ends cancelled (a cancelled top-up's, on a run that goes on).
        self.stopping: dict[int, bool] = {}

    def execute(self) -> None:
        """Run the chunk to its end (every claimed trial written or released)."""
        renew_every = settings.ASSAY["TRIAL_LEASE_SECONDS"] / 3
        renewed = time.monotonic()
        while True:
            # Topped up to twice the concurrency once a quarter of it is free, so the calls
            # waiting for a slot outlast a write batch's window (``calls.WRITE_BATCH_WINDOW_S``)
            # and a claim takes a quarter of the concurrency or more.
            room = 0 if self.run_cancelled else 2 * self.pool.concurrency - self.pool.outstanding
            if room > 0 and self.pending:
                self._claim(room)
                continue
            extending = time.monotonic() < self.extend_until
            quarter = max(1, self.pool.concurrency // 4)
            if extending and room >= quarter and not self._claim_next(room):
                self.extend_until = 0.0  # nothing queued is left: no more queries for it
            if not self.held:
                return
            wait = STOP_CHECK_S
            if self.unwritten:  # no longer than until they are due
                wait = min(wait, self.unwritten_since + WRITE_EVERY_S - time.monotonic())
            arrived = self.pool.results(timeout=wait)
            if arrived and not self.unwritten:
                self.unwritten_since = time.monotonic()
            self.unwritten += arrived
            if self.unwritten and (
                time.monotonic() - self.unwritten_since >= WRITE_EVERY_S
                or self.pool.outstanding == 0
            ):
                self._write(self.unwritten)
                self.unwritten = []
            self._stop_check()  # with every gathering (WRITE_BATCH_WINDOW_S), not every write
            if time.monotonic() - renewed >= renew_every:
                leases_renew(list(self.held))
                renewed = time.monotonic()

    def _claim(self, room: int) -> None:
        offered, self.pending = self.pending[:room], self.pending[room:]
        claimed = trials_claim(
            run_id=self.run_id, trial_ids=offered, run_start=not self.run_started
        )
        if not claimed:
            return
        self.run_started = True
        rows = trials_held(claimed)
        self.held.update((tid, rows[tid]) for tid in claimed)
        self.pool.submit([(tid, rows[tid].case_input) for tid in claimed])

    def _claim_next(self, room: int) -> int:
        """Claim up to ``room`` more of the run's queued trials and start them; returns how many."""
        claimed = trials_claim_next(run_id=self.run_id, limit=room, run_start=not self.run_started)
        if claimed:
            self.run_started = True
            rows = trials_held(claimed)
            self.held.update((tid, rows[tid]) for tid in claimed)
            self.pool.submit([(tid, rows[tid].case_input) for tid in claimed])
        return len(claimed)

    def _write(self, results: list[tuple[int, TargetResult]]) -> None:
        # Results are written as they arrive; a batch is whatever arrived meanwhile. A trial
        # and its deterministic grades commit together: a worker killed between the two would
        # leave an ok trial no later chunk grades (the sweeper re-sends only running trials).
        # A call stopped between attempts (``_stop_check``) ends its trial as cancelled.
        stopped = [
            (tid, r)
            for tid, r in results
            if r.error_kind == CANCELLED_KIND and tid in self.stopping
        ]
        if stopped:
            stopped_ids = {tid for tid, _ in stopped}
            results = [(tid, r) for tid, r in results if tid not in stopped_ids]
            self._stopped_write(stopped)
            if not results:
                return
        with transaction.atomic():
            written = set(
                trial_results_record(
                    run_id=self.run_id, model=self.model, results=results, prices=self.prices
                )
            )
            graded = []
            for trial_id, result in results:
                held = self.held.pop(trial_id, None)
                if held is not None and trial_id in written and result.ok:
                    graded.append((trial_id, held.case_input, result.output or ""))
            if graded and self.specs:
                grades_insert(items=graded, specs=self.specs)
        self.settled |= written
        if self.judged:
            for trial_id, result in results:
                if trial_id not in written:
                    continue
                if result.ok:
                    self.to_judge.append(trial_id)
                else:
                    self.judge_sent.add(trial_id)  # an errored trial is never judged
            if len(self.to_judge) >= trial_chunk_size():
                self.judge_flush()

    def _stopped_write(self, stopped: list[tuple[int, TargetResult]]) -> None:
        """Stopped calls: running -> cancelled (``trials_cancel``), the error saying the attempts
        made; never graded or counted as finished."""
        for uncount in (False, True):
            ids = [tid for tid, _ in stopped if self.stopping[tid] is uncount]
            trials_cancel(
                run_id=self.run_id,
                trial_ids=ids,
                uncount=uncount,
                errors={tid: r.error or "" for tid, r in stopped if tid in ids},
            )
        for tid, _ in stopped:
            self.held.pop(tid, None)
            self.stopping.pop(tid, None)
            self.settled.add(tid)  # nothing to grade
            self.judge_sent.add(tid)  # a cancelled trial is never judged

    def judge_flush(self) -> None:
        """Enqueue the judge rung of the ok trials written since the last flush, in messages of
        ``trial_chunk_size()``. Nothing after the run is cancelled."""
        if self.run_cancelled:
            self.to_judge = []
            return
        for ids in chunked(self.to_judge, trial_chunk_size()):
            _judge_chunk_enqueue(self.run_id, ids)
        self.judge_sent.update(self.to_judge)
        self.to_judge = []

    def _stop_check(self) -> None:
        top_up_ids = {t.top_up_id for t in self.held.values() if t.top_up_id is not None}
        run_cancelled, cancelled_top_ups = _stopped(self.run_id, top_up_ids)
        if not run_cancelled and not cancelled_top_ups:
            return
        withdrawn = self.pool.withdraw()
        stop = [
            tid
            for tid in withdrawn
            if run_cancelled or self.held[tid].top_up_id in cancelled_top_ups
        ]
        keep = [tid for tid in withdrawn if tid not in set(stop)]
        trials_cancel(run_id=self.run_id, trial_ids=stop, uncount=not run_cancelled)
        for tid in stop:
            del self.held[tid]
        if keep:
            self.pool.submit([(tid, self.held[tid].case_input) for tid in keep])
        # Calls already sent make no further attempt (a retry in its back-off ends now, as
        # cancelled: ``_write``); an attempt in flight finishes and its answer is recorded.
        kept = set(keep)
        in_flight = [
            tid
            for tid, held in self.held.items()
            if tid not in self.stopping
            and tid not in kept
            and (run_cancelled or held.top_up_id in cancelled_top_ups)
        ]
        for tid in self.pool.stop(in_flight):
            self.stopping[tid] = not run_cancelled
        if run_cancelled:
            self.run_cancelled = True
            self.pending = []
            self.extend_until = 0.0

    def recover(self, error: OperationalError | InterfaceError) -> None:
        """After a failed database statement: stop new calls, let those in flight end, reconnect,
        write what was paid for, enqueue the rest again. Raises ``error`` when the database stays
        down past ``DB_RECONNECT_S``: the trials keep their lease for the sweeper."""
        self.extend_until = 0.0
        withdrawn = self.pool.withdraw()
        late = self.pool.close()
        logger.warning(
            "run %s: database write failed (%s); %d call(s) not started, %d in flight",
            self.run_ref,
            error,
            len(withdrawn),
            len(late),
        )
        if not _database_reconnect():
            raise error
        paid = [*self.unwritten, *late]
        if paid:
            self._write(paid)
        released = trials_release(list(self.held))
        again = sorted({*released, *self.pending})
        if again:
            _chunks_enqueue(self.run_id, [again])


def trial_chunk_execute(*, run_id: int, trial_ids: list[int]) -> None:
    """Execute one chunk of a run's trials: claim, call concurrently, write and grade each result
    as it arrives, enqueue the judge rung through the outbox, then finalize the run.

    Stops paying promptly: the run's status is read with every batch of results (else every
    ``STOP_CHECK_S``); after a cancel no new call starts (one may within ~50 ms), claimed trials
    not called and calls waiting to retry become cancelled (``providers.call_stop``), calls in
    flight are recorded. Leases are renewed every third of a lease. A failed database statement
    stops new calls and recovers (``_ChunkCalls.recover``).

    Idempotent under redelivery: only trials claimed here by compare-and-set are called, every
    write is a compare-and-set, grades go through the unique (trial, grader) key. Its logs carry
    ``run_id`` (``core.logs``)."""
    with log_context(run_id=run_id):
        _trial_chunk_execute(run_id=run_id, trial_ids=trial_ids)


def _trial_chunk_execute(*, run_id: int, trial_ids: list[int]) -> None:
    run = Run.objects.filter(id=run_id).first()
    if run is None or run.status == Run.Status.CANCELLED:
        return
    specs = list(run.grader_set.specs)
    settled: set[int] = set()
    judge_sent: set[int] = set()
    run_cancelled = False
    if trials_claimable(run_id=run_id, trial_ids=trial_ids):
        # Else no target client, no call loop: the message of a chunk whose trials another
        # chunk took (CHUNK_EXTEND_S), or a redelivery, only makes up grades and finalizes.
        with CallPool(run.target) as pool:
            chunk = _ChunkCalls(run=run, trial_ids=trial_ids, pool=pool, extend_s=CHUNK_EXTEND_S)
            try:
                chunk.execute()
            except (OperationalError, InterfaceError) as exc:
                chunk.recover(exc)
        chunk.judge_flush()
        settled, judge_sent, run_cancelled = chunk.settled, chunk.judge_sent, chunk.run_cancelled
    if not settled.issuperset(trial_ids):
        # Some trial was written elsewhere (a redelivery, a worker that died between writing
        # and grading, another chunk): make up its missing grades. When this chunk wrote and
        # graded every trial itself, nothing can be missing and the query is saved.
        _chunk_grades_complete(run_id=run_id, trial_ids=trial_ids, specs=specs)
    if (
        any(spec.is_judge for spec in specs)
        and not run_cancelled
        and not judge_sent.issuperset(trial_ids)
    ):
        # Enqueued unless this chunk sent the judge rung of every one of its trials itself,
        # even on a redelivery that claimed nothing: the judge service skips trials already
        # judged, so a lost judge task is made up here.
        _judge_chunk_enqueue(run_id, trial_ids)
    logger.info(
        "chunk of %d trials done: %d written here%s",
        len(trial_ids),
        len(settled),
        ", run cancelled" if run_cancelled else "",
    )
    run_close_if_done(run_id=run_id)


def _judge_chunk_enqueue(run_id: int, trial_ids: list[int]) -> None:
    """The judge rung of a chunk's ok trials, enqueued through the outbox by the registered rung."""
    judge_rung_required().chunk_enqueue(
        run_id=run_id, trial_ids=trial_ids, subject=run_subject(run_id)
    )
