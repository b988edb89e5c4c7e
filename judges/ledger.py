"""The judge call ledger: one ``JudgeCallRecord`` per call Assay sends to a judge endpoint,
so judge spend is read from what was paid, not from the grades that were kept.

A call is opened (``judge_calls_open``, status ``sent``) as it is sent (the calls permitted
within one write window, ``judges.calling.WRITE_WINDOW_S``, go in one insert) and closed
(``judge_calls_close``) with its tokens, cost and outcome when its answer is written. A
worker killed in between leaves it ``sent``: counted, with unknown tokens and cost. A call
whose grade lost a race to another call's (the same (trial, grader) written first) is
closed ``lost``: paid, counted, its answer not kept. Unknown cost is null, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db import connection
from django.db.models import Field, QuerySet
from django.utils import timezone

from evals.grading.rungs import Spend
from judges.client import JudgeReply
from judges.models import JudgeCallRecord, JudgeVersion


@dataclass(frozen=True)
class CallOpened:
    """A call about to be sent: its fence ``nonce`` and the key it is made for (``trial_id``
    and ``grader``, or ``pair_id`` and ``position``); ``run_id`` the judged trial's run (a
    pair's head run)."""

    nonce: str
    run_id: int | None
    trial_id: int | None = None
    grader: str = ""
    pair_id: int | None = None
    position: str = ""


@dataclass(frozen=True)
class CallAnswered:
    """A call's answer as recorded: the reply, its cost (USD as text, None when unknown)
    and price source, and whether its grade or verdict is the one stored."""

    nonce: str
    reply: JudgeReply
    cost_usd: str | None
    price_source: str | None
    stored: bool


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


CLOSE_FIELDS = (
    "status",
    "outcome",
    "attempts",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "price_source",
    "latency_ms",
    "answered_at",
)


def judge_calls_close(*, answers: list[CallAnswered]) -> int:
    """Complete the ledger rows of answered calls: status (``answered``, or ``failed`` when
    the provider or transport failed), HTTP attempts, tokens, latency (ms), cost (USD, null
    when unknown) and outcome (``stored`` or ``lost``).

    One prepared ``UPDATE ... WHERE nonce = %s`` run with ``executemany`` (a hot path:
    ``bulk_update`` spends more CPU building its CASE expression than the database spends
    writing, as in ``evals.runner.execute``); values go through each field's
    ``get_db_prep_save``, as the ORM would adapt them."""
    if not answers:
        return 0
    now = timezone.now()
    status, outcome = JudgeCallRecord.Status, JudgeCallRecord.Outcome
    fields: list[Field] = []
    for name in CLOSE_FIELDS:
        field = JudgeCallRecord._meta.get_field(name)
        assert isinstance(field, Field)  # every name in CLOSE_FIELDS is a concrete column
        fields.append(field)
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
            "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens,
            "cost_usd": None if a.cost_usd is None else Decimal(a.cost_usd),
            "price_source": a.price_source or "",
            "latency_ms": round(r.latency_ms, 3),
            "answered_at": now,
        }
        params.append([f.get_db_prep_save(values[f.name], connection) for f in fields] + [a.nonce])
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
    return len(params)


def spend_from_rows(rows: list[tuple]) -> Spend | None:
    """``rows``: ``(status, outcome, attempts, input_tokens, output_tokens, cost_usd)`` per
    ledger row. None when there is no row."""
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
    """Every judge call made for the trials of run ``run_id`` (its judge rung and judge runs
    on it; pairwise calls are counted on their judge version, not here): one query."""
    return spend_get(records=JudgeCallRecord.objects.filter(run_id=run_id, trial__isnull=False))
