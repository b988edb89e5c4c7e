"""Judge calls and spend (docs/operations.md), counted where the call ledger is written
(``judges.ledger``), so each call sent counts once: when it is sent, then when it closes
with its status and its cost. Unknown cost is counted apart, never as zero dollars."""

from __future__ import annotations

from decimal import Decimal

from prometheus_client import Counter

JUDGE_CALLS_SENT = Counter(
    "assay_judge_calls_sent",
    "Judge calls sent (injection probes and a race's loser included).",
)
JUDGE_CALLS = Counter(
    "assay_judge_calls",
    "Judge calls closed, by status (answered, failed) and outcome (stored, lost).",
    ["status", "outcome"],
)
JUDGE_SPEND = Counter(
    "assay_judge_spend_usd",
    "US dollars spent on judge calls whose cost is known.",
)
JUDGE_COST_UNKNOWN = Counter(
    "assay_judge_calls_cost_unknown",
    "Judge calls closed whose cost is unknown (no price for the model, or no usage).",
)


def judge_calls_sent_count(n: int) -> None:
    """Count ``n`` calls sent."""
    if n:
        JUDGE_CALLS_SENT.inc(n)


def judge_call_closed_count(*, status: str, outcome: str, cost_usd: Decimal | None) -> None:
    """Count one closed call and its cost (USD; None: unknown)."""
    JUDGE_CALLS.labels(status, outcome).inc()
    if cost_usd is None:
        JUDGE_COST_UNKNOWN.inc()
    else:
        JUDGE_SPEND.inc(float(cost_usd))
