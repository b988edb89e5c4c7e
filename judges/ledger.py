"""The judge call ledger: one ``JudgeCallRecord`` per call sent, so judge spend is what was
paid, not what was kept. A call is opened ``sent`` (one insert per write window,
``judges.calling.WRITE_WINDOW_S``) and closed with tokens, cost and outcome; a killed
worker's call stays ``sent``, counted with unknown cost; a call whose grade lost the race
for its key is closed ``lost``. Unknown cost is null, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
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
) -> None:
    """Record ``calls`` as sent (one insert), for a judge run or a probe run if given."""
    now = timezone.now()
    JudgeCallRecord.objects.bulk_create(
        [
            JudgeCallRecord(
                nonce=c.nonce,
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
    """Close answered calls' rows: status, attempts, tokens, latency (ms), cost (USD, null when
    unknown), outcome (``stored``/``lost``). One prepared ``UPDATE ... WHERE nonce = %s`` with
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
            "status": status.ANSWERED if r.ok else status.FAILED,
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
    """``rows``: ``(status, outcome, attempts, input_tokens, output_tokens, cost_usd)`` per
    ledger row; None when empty."""
    if not rows:
        return None
    inputs = [r[3] for r in rows if r[3] is not None]
    outputs = [r[4] for r in rows if r[4] is not None]
    costs = [Decimal(r[5]) for r in rows if r[5] is not None]
    return Spend(
        calls=len(rows),
        requests=sum(r[2] or 1 for r in rows),
        lost=sum(1 for r in rows if r[1] == JudgeCallRecord.Outcome.LOST),
        unanswered=sum(1 for r in rows if r[0] == JudgeCallRecord.Status.SENT),
        input=sum(inputs),
        input_unknown=len(rows) - len(inputs),
        output=sum(outputs),
        output_unknown=len(rows) - len(outputs),
        known_usd=sum(costs, Decimal(0)) if costs else None,
        cost_unknown=len(rows) - len(costs),
    )


SPEND_COLUMNS = ("status", "outcome", "attempts", "input_tokens", "output_tokens", "cost_usd")


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
