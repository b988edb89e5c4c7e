"""An agent trial with a hostile trajectory, for the trial page's tests (view and browser)."""

from __future__ import annotations

from evals.models import Case, Grade, Run, Suite, Trial

HOSTILE_RESULT = "<script>alert('tool')</script><img src=x onerror=alert(2)>"
BIG_RESULT = "<b onclick=alert(3)>big</b>" + "z" * 200_000  # a 200 KB tool result
GOAL = {"orders": {"A1": {"refunded": 30}}}
FINAL = {"orders": {"A1": {"refunded": 30, "note": "<script>alert('state')</script>"}}}


def agent_trial(*, suite: str = "agents") -> Trial:
    """One ok trial of a new run whose trajectory holds markup in a message, a tool's
    arguments and results, a failed tool step and a 200 KB result, with figures on some steps
    and none on others; final state and the case's goal state set; one passing grade."""
    s = Suite.objects.create(name=suite)
    case = Case.objects.create(suite=s, key="refund-A1", input="refund A1", goal_state=GOAL)
    run = Run.objects.create(
        suite=s,
        name="agent-run",
        target_kind="openai",
        graders=[{"key": "says", "kind": "contains", "gating": True}],
        trials_per_case=1,
        status=Run.Status.SUCCEEDED,
    )
    steps = [
        {
            "kind": "message",
            "role": "assistant",
            "content": "Looking up <i>A1</i>.",
            "input_tokens": 120,
            "output_tokens": 18,
            "latency_ms": 410.0,
            "cost_usd": 0.0000288,
        },
        {"kind": "tool_call", "name": "lookup_order", "arguments": {"q": "<svg onload=alert(5)>"}},
        {"kind": "tool_result", "name": "lookup_order", "content": HOSTILE_RESULT, "status": "ok"},
        {"kind": "tool_call", "name": "issue_refund", "arguments": {"amount": 30}, "id": "c2"},
        {
            "kind": "tool_result",
            "name": "issue_refund",
            "id": "c2",
            "content": "RuntimeError: refund service down",
            "status": "error",
            "latency_ms": 3.0,
        },
        {"kind": "tool_call", "name": "lookup_catalog", "arguments": {}},
        {"kind": "tool_result", "name": "lookup_catalog", "content": BIG_RESULT, "status": "ok"},
        {
            "kind": "message",
            "role": "assistant",
            "content": "Refunded.",
            "input_tokens": 5000,
            "output_tokens": 4,
            "latency_ms": 600.0,
            "cost_usd": None,
        },
    ]
    trial = Trial.objects.create(
        run=run,
        case=case,
        attempt=1,
        status=Trial.Status.OK,
        output="Refunded.",
        trajectory=steps,
        final_state=FINAL,
    )
    Grade.objects.create(trial=trial, grader="says", passed=True, score=1.0, reason="ok")
    return trial
