"""The judge call ledger: one ``JudgeCallRecord`` per call permitted, so judge spend is what
was paid, not what was kept. A call is opened (one insert per write window,
``judges.calling.WRITE_WINDOW_S``) ``claimed``, or ``sent`` when its first request has
already gone out, marked ``sent`` when it goes out later (``CallNotes``), and closed with
tokens, cost and outcome. A killed worker's sent call stays ``sent``, counted with unknown
cost; its call still ``claimed`` (waiting for the endpoint's limiter) never left and is not
counted as sent, nor is a call that ended with no request made. A call whose grade lost the
race for its key is closed ``lost``. Unknown cost is null, never zero.

What a worker loss re-pays (bench/README.md, judge calls): its calls left ``sent`` (in
flight, or answered and not yet written: the ledger cannot tell which) whose key was then
judged by another call. ``Spend.repaid`` counts them where the key is known (a trial and
grader).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Field, QuerySet
from django.utils import timezone

from core.db import model_field
from evals.grading.rungs import Spend
from judges.client import JudgeReply
from judges.metrics import judge_call_closed_count, judge_calls_sent_count
from judges.models import JudgeCallRecord, JudgeVersion
from providers.pricing import Price, RepriceTally, cost_reprice
from providers.usage import TOKEN_CLASSES, usage_of, usage_tokens

USAGE_FIELDS = tuple(f"{name}_tokens" for name in TOKEN_CLASSES)


@dataclass(frozen=True)
class CallOpened:
    """A call about to be sent: fence ``nonce``, its key (``trial_id`` and ``grader``, or
    ``pair_id`` and ``position``), ``run_id`` (a pair's head run)."""

    nonce: str
    run_id: int | None
    trial_id: int | None = None
    grader: str = ""
    pair_id: int | None = None
    position: str = ""


@dataclass(frozen=True)
class CallAnswered:
    """The reply, cost (USD as text, None when unknown), price source, what the cost rests on
    (``providers.pricing.Costing.basis``), and whether its row is the one stored."""

    nonce: str
    reply: JudgeReply
    cost_usd: str | None
    price_source: str | None
    stored: bool
    cost_basis: dict[str, Any] | None = None


def judge_calls_open(
    *,
    judge_version: JudgeVersion,
    calls: list[CallOpened],
    judge_run_id: int | None = None,
    probe_run_id: int | None = None,
    sending: Iterable[str] = (),
) -> None:
    """Record ``calls`` (one insert), for a judge run or a probe run if given: ``sent`` when
    their nonce is in ``sending`` (the first request went out), else ``claimed``."""
    now = timezone.now()
    sending = set(sending)
    status = JudgeCallRecord.Status
    JudgeCallRecord.objects.bulk_create(
        [
            JudgeCallRecord(
                nonce=c.nonce,
                status=status.SENT if c.nonce in sending else status.CLAIMED,
                judge_version=judge_version,
                run_id=c.run_id,
                trial_id=c.trial_id,
                grader=c.grader,
                pair_id=c.pair_id,
                position=c.position,
                judge_run_id=judge_run_id,
                probe_run_id=probe_run_id,
                sent_at=now,
            )
            for c in calls
        ]
    )
    judge_calls_sent_count(len(calls))


def judge_calls_sent(*, nonces: Iterable[str]) -> int:
    """Mark the ``claimed`` calls ``nonces`` ``sent`` (their first request went out); returns
    how many. One query."""
    nonces = list(nonces)
    if not nonces:
        return 0
    return JudgeCallRecord.objects.filter(
        nonce__in=nonces, status=JudgeCallRecord.Status.CLAIMED
    ).update(status=JudgeCallRecord.Status.SENT)


@dataclass
class CallNotes:
    """What ``judges.calling.calls_send`` learnt and the ledger has not yet been told: calls
    permitted (``permitted``), nonces whose first request went out (``sending``). ``flush``
    writes them, in the caller's thread, before any answer is closed."""

    judge_version: JudgeVersion
    judge_run_id: int | None = None
    probe_run_id: int | None = None
    unopened: list[CallOpened] = field(default_factory=list)
    unsent: set[str] = field(default_factory=set)  # opened claimed, not yet marked sent
    sending: set[str] = field(default_factory=set)  # went out, not yet written

    def permitted(self, calls: Iterable[CallOpened]) -> None:
        """``calls`` may be sent: opened at the next ``flush``."""
        self.unopened.extend(calls)

    def sent(self, nonces: Iterable[str]) -> None:
        """The first request of each call ``nonces`` went out."""
        self.sending.update(nonces)

    def flush(self) -> None:
        """Open the permitted calls (``sent`` or ``claimed``) and mark sent those opened
        ``claimed`` before: two queries at most."""
        if self.unopened:
            judge_calls_open(
                judge_version=self.judge_version,
                calls=self.unopened,
                judge_run_id=self.judge_run_id,
                probe_run_id=self.probe_run_id,
                sending=self.sending,
            )
            opened = {c.nonce for c in self.unopened}
            self.unsent |= opened - self.sending
            self.sending -= opened
            self.unopened = []
        if self.sending:
            judge_calls_sent(nonces=self.sending & self.unsent)
            self.unsent -= self.sending
            self.sending = set()


CLOSE_FIELDS = (
    "status",
    "outcome",
    "attempts",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "cost_usd",
    "price_source",
    "cost_basis",
    "latency_ms",
    "answered_at",
)


def judge_calls_close(*, answers: list[CallAnswered]) -> int:
    """Close answered calls' rows: status (``claimed`` when no request was made: ``attempts``
    0), attempts, tokens, latency (ms), cost (USD, null when unknown), outcome
    (``stored``/``lost``). One prepared ``UPDATE ... WHERE nonce = %s`` with
    ``executemany``: on this hot path ``bulk_update`` spends more CPU on its CASE than the
    database spends writing; values go through each field's ``get_db_prep_save``."""
    if not answers:
        return 0
    now = timezone.now()
    status, outcome = JudgeCallRecord.Status, JudgeCallRecord.Outcome
    fields = [model_field(JudgeCallRecord, name, Field) for name in CLOSE_FIELDS]
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(JudgeCallRecord._meta.db_table)} SET "
        + ", ".join(f"{quote(f.column)} = %s" for f in fields)
        + f" WHERE {quote('nonce')} = %s"
    )
    params = []
    for a in answers:
        r = a.reply
        values = {
            "status": (
                status.CLAIMED if r.attempts == 0 else status.ANSWERED if r.ok else status.FAILED
            ),
            "outcome": outcome.STORED if a.stored else outcome.LOST,
            "attempts": r.attempts,
            **usage_tokens(usage_of(r)),
            "cost_usd": None if a.cost_usd is None else Decimal(a.cost_usd),
            "price_source": a.price_source or "",
            "cost_basis": a.cost_basis,
            "latency_ms": round(r.latency_ms, 3),
            "answered_at": now,
        }
        params.append([f.get_db_prep_save(values[f.name], connection) for f in fields] + [a.nonce])
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
    for a in answers:
        judge_call_closed_count(
            status=status.ANSWERED if a.reply.ok else status.FAILED,
            outcome=outcome.STORED if a.stored else outcome.LOST,
            cost_usd=None if a.cost_usd is None else Decimal(a.cost_usd),
        )
    return len(params)


def spend_from_rows(rows: list[tuple]) -> Spend | None:
    """``rows``: ``(status, outcome, attempts, input_tokens, output_tokens, cost_usd, trial_id,
    grader)`` per ledger row; None when empty. Calls sent only count as calls (``claimed``
    rows are ``unsent``); ``repaid``: sent calls left with no answer recorded whose trial and
    grader another call's grade was stored for (module docstring)."""
    if not rows:
        return None
    status, outcome = JudgeCallRecord.Status, JudgeCallRecord.Outcome
    sent = [r for r in rows if r[0] != status.CLAIMED]
    inputs = [r[3] for r in sent if r[3] is not None]
    outputs = [r[4] for r in sent if r[4] is not None]
    costs = [Decimal(r[5]) for r in sent if r[5] is not None]
    judged = {(r[6], r[7]) for r in rows if r[1] == outcome.STORED and r[6] is not None}
    unanswered = [r for r in sent if r[0] == status.SENT]
    return Spend(
        calls=len(sent),
        requests=sum(r[2] or 1 for r in sent),
        lost=sum(1 for r in sent if r[1] == outcome.LOST),
        unanswered=len(unanswered),
        input=sum(inputs),
        input_unknown=len(sent) - len(inputs),
        output=sum(outputs),
        output_unknown=len(sent) - len(outputs),
        known_usd=sum(costs, Decimal(0)) if costs else None,
        cost_unknown=len(sent) - len(costs),
        unsent=len(rows) - len(sent),
        repaid=sum(1 for r in unanswered if r[6] is not None and (r[6], r[7]) in judged),
    )


SPEND_COLUMNS = (
    "status",
    "outcome",
    "attempts",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "trial_id",
    "grader",
)


def spend_get(*, records: QuerySet[JudgeCallRecord]) -> Spend | None:
    """The ``Spend`` of the ledger rows ``records`` (one query), None when there is none."""
    return spend_from_rows(list(records.order_by().values_list(*SPEND_COLUMNS)))


def run_judge_spend(*, run_id: int) -> Spend | None:
    """Every judge call made for run ``run_id``'s trials (pairwise calls count on their version,
    not here); one query."""
    return spend_get(records=JudgeCallRecord.objects.filter(run_id=run_id, trial__isnull=False))


def run_calls_reprice(
    *, run_id: int, prices: dict[str | None, Price | None], write: bool
) -> RepriceTally:
    """Re-price the run's judge calls whose cost Assay priced (``cost_basis`` set) at today's
    table (``providers.pricing.cost_reprice``); when ``write``, the changed ones get the new
    cost, basis and price source. The grade's ``details`` keep the cost seen when grading;
    the ledger is the spend of record."""
    tally = RepriceTally()
    changed: list[JudgeCallRecord] = []
    records = JudgeCallRecord.objects.filter(run_id=run_id, cost_basis__isnull=False).only(
        "id", "cost_usd", "cost_basis", "price_source", *USAGE_FIELDS
    )
    for record in records.order_by("id"):
        costing = cost_reprice(record.cost_basis, usage_of(record), prices)
        if costing is None:
            continue
        if tally.add(old_usd=record.cost_usd, old_basis=record.cost_basis, costing=costing):
            record.cost_usd = costing.total_usd
            record.cost_basis = costing.basis()
            record.price_source = costing.source or ""
            changed.append(record)
    if write and changed:
        JudgeCallRecord.objects.bulk_update(
            changed, ["cost_usd", "cost_basis", "price_source"], batch_size=500
        )
    return tally
