"""Tools and an environment for the tool-loop tests (declared by path in target configs)."""

from __future__ import annotations

import asyncio
import time

from core.registry import registered


@registered("environment")
def environment(case):
    """A shop with one order per case; ``case.input`` names nothing the tools need."""
    return {"orders": {"A1": {"total": 30, "refunded": 0}}, "log": []}


@registered("tool")
def lookup_order(state: dict, order_id: str) -> dict:
    """Look an order up by id.

    Returns the order, or raises KeyError."""
    state["log"].append(f"lookup {order_id}")
    return state["orders"][order_id]


@registered("tool")
def issue_refund(state: dict, order_id: str, amount: float) -> str:
    """Refund an amount on an order."""
    state["orders"][order_id]["refunded"] += amount
    state["log"].append(f"refund {order_id} {amount}")
    return f"refunded {amount}"


@registered("tool", "environment")
def boom(state: dict) -> str:
    """Changes the state, then fails: the change must not stay."""
    state["log"].append("boom was here")
    raise RuntimeError("refund service down <script>alert(1)</script>")


@registered("tool")
def slow(state: dict, seconds: float = 2.0) -> str:
    """Sleeps past any small timeout, then writes to the state it was given."""
    time.sleep(seconds)
    state["log"].append("slow finished")
    return "late"


@registered("tool")
async def slow_async(state: dict, seconds: float = 2.0) -> str:
    """The same as a coroutine."""
    await asyncio.sleep(seconds)
    state["log"].append("slow_async finished")
    return "late"


@registered("tool")
def huge(state: dict) -> str:
    """A 200 KB result with markup in it."""
    return "<script>alert('x')</script>" + "y" * 200_000


@registered("tool")
def not_json(state: dict) -> object:
    """Returns something that is not JSON."""
    return {1, 2}


@registered("tool")
def documented(state: dict, query: str, limit: int = 5) -> list:
    """Search the catalogue.

    The second paragraph is not part of the description."""
    return []


@registered("tool")
def declared(state: dict, **kwargs) -> str:
    return "ok"


declared.tool_schema = {
    "description": "A tool with its own schema",
    "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
}


@registered("environment")
def mock_shop(case):
    """The shop the shared mock's scripted agent works in: it looks up and refunds order
    ``"mock"`` (its argument for a string parameter), amount 1.0 (for a number)."""
    return {"orders": {"mock": {"total": 1, "refunded": 0}}, "log": []}
