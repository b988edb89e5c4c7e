"""The refund agent's world as tool-loop tools (docs/agents.md), so a real model can play it
through an ``openai`` target with ``tools`` (``examples/agent.toml``). A trial's state has
``demo.refund_agent.goal_state``'s shape, so the ``state`` grader applies."""

from __future__ import annotations

from typing import Any

from core.registry import registered
from demo.refund_agent import ORDERS


@registered("environment")
def environment(case) -> dict:
    """The state a trial starts from: the case's order (``case.input["order_id"]``) as it
    is, nothing refunded or escalated. Raises KeyError for an order the demo does not
    have."""
    order_id = case.input["order_id"]
    return {
        "order": {"id": order_id, "status": ORDERS[order_id]["status"]},
        "refunds": [],
        "escalations": [],
    }


def _order(state: dict, order_id: str) -> dict:
    if order_id != state["order"]["id"]:
        raise KeyError(f"no order {order_id!r} for this customer")
    return state["order"]


@registered("tool")
def lookup_order(state: dict, order_id: str) -> dict[str, Any]:
    """Look an order up: its id, total (USD), status and days since delivery."""
    order = _order(state, order_id)
    known = ORDERS[order_id]
    return {
        "id": order_id,
        "total": known["total"],
        "status": order["status"],
        "days": known["days"],
    }


@registered("tool")
def issue_refund(state: dict, order_id: str, amount: float) -> dict[str, Any]:
    """Refund an amount (USD) on an order."""
    order = _order(state, order_id)
    state["refunds"].append({"order_id": order_id, "amount": amount})
    order["status"] = "refunded"
    return {"refunded": amount}


@registered("tool")
def escalate(state: dict, order_id: str, reason: str) -> dict[str, Any]:
    """Hand an order to a human colleague, with the reason."""
    order = _order(state, order_id)
    state["escalations"].append({"order_id": order_id})
    order["status"] = "escalated"
    return {"ticket": f"T-{len(state['escalations'])}"}
