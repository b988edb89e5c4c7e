"""An Inspect AI log of an agent (tool calls in ``messages``) imports as trajectories, with
epochs as attempts (tests/fixtures/interop/inspect/agent-log.json: hand-written in the shape
of inspect-ai 0.3.x's ``EvalSample``, ``ChatMessageTool``, ``ToolCall``, ``ModelEvent``)."""

from __future__ import annotations

import json

import pytest

from core.errors import DomainError
from evals.models import Grade, Trial
from evals.report.selectors import run_report
from evals.trajectory.steps import trajectory_totals
from tests.interop.test_import_inspect import FIXTURES, LOG, _bytes, _import

pytestmark = pytest.mark.django_db
AGENT_LOG = FIXTURES / "agent-log.json"


def _trials(summary) -> dict[tuple[str, int], Trial]:
    run = summary.runs[0]
    return {
        (t.case.key, t.attempt): t for t in Trial.objects.filter(run=run).select_related("case")
    }


def test_an_agent_log_imports_trajectories_final_states_and_goal_states_epochs_as_attempts():
    summary = _import(AGENT_LOG.read_bytes(), name="agent-log.json")
    trials = _trials(summary)
    assert sorted(trials) == [
        ("refund-A1", 1),
        ("refund-A1", 2),
        ("refund-B7", 1),
        ("refund-B7", 2),
    ]

    good = trials[("refund-A1", 1)]
    assert [(s["kind"], s.get("name")) for s in good.trajectory] == [
        ("tool_call", "lookup_order"),
        ("tool_result", "lookup_order"),
        ("message", None),
        ("tool_call", "issue_refund"),
        ("tool_result", "issue_refund"),
        ("message", None),
    ]
    assert good.trajectory[0]["arguments"] == {"order_id": "A1"}
    assert good.trajectory[0]["id"] == good.trajectory[1]["id"] == "call_a1_1"
    # the model event of each assistant message gives its first step's figures
    assert good.trajectory[0]["input_tokens"] == 120
    assert good.trajectory[0]["latency_ms"] == pytest.approx(410)
    assert good.trajectory[0]["cost_usd"] == pytest.approx(0.0000288)
    assert good.trajectory[1]["latency_ms"] == pytest.approx(4)  # the tool event
    totals = trajectory_totals(good.trajectory)
    assert (totals.input_tokens, totals.output_tokens) == (402, 61)
    assert totals.tools == ("lookup_order", "issue_refund")
    assert good.final_state == {"orders": {"A1": {"total": 30.0, "refunded": 30.0}}}
    assert good.case.goal_state == {"orders": {"A1": {"total": 30.0, "refunded": 30.0}}}

    refused = trials[("refund-A1", 2)]
    assert refused.trajectory[0] == {
        "kind": "message",
        "role": "assistant",
        "content": "[reasoning]\nRefunding now.",
        "input_tokens": 118,
        "output_tokens": 22,
        "latency_ms": pytest.approx(350),
        "cost_usd": None,  # Inspect did not price it: unknown, never zero
    }
    failed = refused.trajectory[2]
    assert failed["status"] == "error"
    assert failed["content"] == "unknown: ValueError: amount 45.0 exceeds the order total 30.0"

    parsed = trials[("refund-B7", 1)]
    assert parsed.trajectory[1]["status"] == "error"
    assert parsed.trajectory[1]["content"].startswith("parsing: Expecting ','")
    big = parsed.trajectory[3]
    assert big["name"] == "lookup_catalog" and len(big["content"]) > 20_000  # the attachment
    assert "<script>" in big["content"]  # stored as data; escaped where shown
    assert parsed.final_state["tickets"] == [88]

    errored = trials[("refund-B7", 2)]
    assert errored.status == Trial.Status.ERROR
    assert errored.error_message.startswith("RateLimitError")
    assert [s["kind"] for s in errored.trajectory] == ["tool_call", "tool_result"]
    assert not Grade.objects.filter(trial=errored).exists()


def test_the_pass_rate_equals_the_accuracy_inspect_printed_for_the_agent_log():
    summary = _import(AGENT_LOG.read_bytes(), name="agent-log.json")
    overall = run_report(run=summary.runs[0]).to_dict()["overall"]
    assert overall["pass_rate"]["mean"] == pytest.approx(0.75)


def test_a_plain_log_imports_without_trajectories():
    summary = _import(LOG.read_bytes())
    run = summary.runs[0]
    assert not Trial.objects.filter(run=run, trajectory__isnull=False).exists()
    assert not Trial.objects.filter(run=run, final_state__isnull=False).exists()


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (
            lambda s: s["messages"][2]["tool_calls"][0].update(function=None),
            "samples[0].messages[2].tool_calls[0].function",
        ),
        (lambda s: s["messages"][3].update(role="robot"), "samples[0].messages[3].role"),
        (
            lambda s: s["messages"][3].update(content=[{"type": "text", "text": 5}]),
            "samples[0].messages[3].content[0].text",
        ),
        (lambda s: s.update(store=["not", "an", "object"]), "samples[0].store"),
    ],
)
def test_a_malformed_agent_sample_is_refused_naming_the_json_path(edit, field):
    doc = json.loads(AGENT_LOG.read_bytes())
    edit(doc["samples"][0])
    with pytest.raises(DomainError) as caught:
        _import(_bytes(doc), name="agent-log.json")
    assert caught.value.field == field
