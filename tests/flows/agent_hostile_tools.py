"""A callable agent and tools whose text is hostile (markup, U+0000, lone surrogates, a 1 MB
result), declared by path in the hostile agent tests (tests/flows/test_agent_hostile.py)."""

from __future__ import annotations

from core.registry import registered

SCRIPT_TOOL = "<script>alert('tool')</script>"
IMG_KEY = "<img src=x onerror=alert('key')>"
BIG = "<script>alert('big')</script>\u0000" + "y" * 1_000_000  # a 1 MB tool result


@registered("pipeline")
def hostile_agent(case) -> dict:
    """Case ``right``: the goal state by a path that calls a tool named with markup and never
    refunds after the lookup; case ``wrong``: the expected path, but a final state with a
    markup key holding U+0000. Both carry NUL and a lone surrogate in a tool's arguments and
    a 1 MB result."""
    steps = [
        {"kind": "message", "role": "assistant", "content": "on it \ud800", "cost_usd": None},
        {"kind": "tool_call", "name": SCRIPT_TOOL, "arguments": {"q": "<b>\u0000\udfff</b>"}},
        {"kind": "tool_result", "name": SCRIPT_TOOL, "content": BIG, "status": "ok"},
        {"kind": "tool_call", "name": "lookup_order", "arguments": {"order_id": "A1"}},
        {"kind": "tool_result", "name": "lookup_order", "content": {"total": 30}},
    ]
    if case.key == "right":
        return {"output": "done <script>", "trajectory": steps, "final_state": {"done": True}}
    steps += [
        {"kind": "tool_call", "name": "issue_refund", "arguments": {"amount": 30}},
        {"kind": "tool_result", "name": "issue_refund", "content": "ok"},
    ]
    final = {"done": True, IMG_KEY: "\u0000"}
    return {"output": "done", "trajectory": steps, "final_state": final}


@registered("environment")
def environment(case) -> dict:
    """An empty world."""
    return {"done": False}


@registered("tool")
def huge(state: dict) -> str:
    """A 1 MB result with markup, U+0000 and a lone surrogate in it."""
    return BIG + "\udc00"


@registered("tool")
def finish(state: dict) -> dict:
    """Marks the world done."""
    state["done"] = True
    return {"done": True}
