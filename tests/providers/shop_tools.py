"""A shop's tools for the tool loop through a real worker against the shared mock's scripted
agent: each declares its schema with ``examples`` (``tool_schema``), from which the mock takes
the arguments (``examples[0]``), so a ``correct`` trajectory finds order A1 and refunds 30."""

from __future__ import annotations

from core.registry import registered


@registered("environment")
def shop(case):
    """One order, A1, of 30, nothing refunded yet."""
    return {"orders": {"A1": {"total": 30, "refunded": 0}}, "log": []}


@registered("tool")
def find_order(state: dict, order_id: str) -> dict:
    """The order ``order_id``, or KeyError."""
    state["log"].append(f"find {order_id}")
    return state["orders"][order_id]


find_order.tool_schema = {
    "description": "Find an order by its id.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string", "examples": ["A1"]}},
        "required": ["order_id"],
    },
}


@registered("tool")
def refund_order(state: dict, order_id: str, amount: int) -> str:
    """Refund ``amount`` on ``order_id``."""
    state["orders"][order_id]["refunded"] += amount
    state["log"].append(f"refund {order_id} {amount}")
    return f"refunded {amount}"


refund_order.tool_schema = {
    "description": "Refund an amount on an order.",
    "parameters": {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "examples": ["A1"]},
            "amount": {"type": "integer", "examples": [30]},
        },
        "required": ["order_id", "amount"],
    },
}
