"""The expense-policy assistant's rules, and an oracle grader built on them.

Policy EXP-7 (the demo's ground truth):
- a receipt is always required: a claim without a receipt is ``rejected``;
- a claim with a receipt needs manager approval (``needs_approval``) only when its amount
  is strictly above the threshold (EUR 500.00); at or below it is ``approved``.

The assistant under test answers with JSON ``{"decision": ..., "policy_id": "EXP-7"}``.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from core.registry import registered

POLICY_ID = "EXP-7"
APPROVAL_THRESHOLD_EUR = Decimal("500.00")
DECISIONS = ("approved", "needs_approval", "rejected")


def expected_decision(claim: dict[str, Any]) -> str:
    """The decision policy EXP-7 requires for ``claim`` = ``{"amount_eur": "123.45",
    "has_receipt": bool, ...}``. Raises ValueError on a malformed claim."""
    try:
        amount = Decimal(str(claim["amount_eur"]))
    except (KeyError, InvalidOperation) as exc:
        raise ValueError(f"claim.amount_eur: not a decimal amount ({exc})") from exc
    has_receipt = claim.get("has_receipt")
    if not isinstance(has_receipt, bool):
        raise ValueError("claim.has_receipt: expected true or false")
    if not has_receipt:
        return "rejected"
    return "needs_approval" if amount > APPROVAL_THRESHOLD_EUR else "approved"


@registered("grader")
def oracle(case, output: str) -> dict[str, Any]:
    """Passes when the output's decision is the one EXP-7 requires for ``case.input``. Returns
    ``{"passed", "score": 0|1, "reason"}``; non-JSON or no decision fails with that reason."""
    claim = case.input if isinstance(case.input, dict) else json.loads(case.input)
    want = expected_decision(claim)
    try:
        reply = json.loads(output)
    except json.JSONDecodeError:
        return {"passed": False, "score": 0.0, "reason": "reply is not JSON"}
    got = reply.get("decision") if isinstance(reply, dict) else None
    if got is None:
        return {"passed": False, "score": 0.0, "reason": "reply has no decision"}
    if got != want:
        return {
            "passed": False,
            "score": 0.0,
            "reason": f"decision {got!r} where policy requires {want!r}",
        }
    return {"passed": True, "score": 1.0, "reason": f"decision {want!r} as policy requires"}
