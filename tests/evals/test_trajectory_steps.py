"""The trajectory shape: what comes in from outside is refused with the step named, what a
pipeline returns is cleaned, totals keep unknown as unknown, and the runner stores both."""

from __future__ import annotations

import asyncio

import pytest

from core.errors import DomainError
from core.registry import registered
from core.text import REPLACED_KEY
from evals.models import Case, Run, Suite, Trial, content_hash
from evals.runner.start import run_start
from evals.runner.targets.base import CaseInput, TargetResult, result_storable, target_from_config
from evals.trajectory.steps import (
    TrajectoryError,
    final_state_parse,
    trajectory_clean,
    trajectory_parse,
    trajectory_totals,
)

STEPS = [
    {"kind": "message", "content": "Let me look the order up.", "output_tokens": 7},
    {"kind": "tool_call", "name": "lookup_order", "arguments": {"order_id": "A1"}, "id": "c1"},
    {"kind": "tool_result", "id": "c1", "content": {"total": 30}, "latency_ms": 12.5},
    {"kind": "tool_call", "name": "issue_refund", "arguments": {"amount": 30}, "cost_usd": 0.001},
    {"kind": "tool_result", "status": "error", "content": "refund service down"},
]


def test_parse_fills_defaults_and_keeps_order():
    steps = trajectory_parse(STEPS)
    assert [s["kind"] for s in steps] == [s["kind"] for s in STEPS]
    assert steps[0]["role"] == "assistant"
    assert steps[2]["status"] == "ok"
    assert steps[4]["status"] == "error"
    assert trajectory_parse(None) is None


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ([{"kind": "thought"}], "trajectory[0].kind"),
        ([STEPS[0], {"kind": "tool_call", "name": ""}], "trajectory[1].name"),
        ([{"kind": "tool_call", "name": "x", "arguments": "a=1"}], "trajectory[0].arguments"),
        ([{"kind": "tool_result", "status": "failed"}], "trajectory[0].status"),
        ([{"kind": "message", "content": "hi", "tokens": 3}], "trajectory[0].tokens"),
        ([{"kind": "message", "input_tokens": -1}], "trajectory[0].input_tokens"),
        ([{"kind": "message", "input_tokens": 1.5}], "trajectory[0].input_tokens"),
        ([{"kind": "message", "cost_usd": float("nan")}], "trajectory[0].cost_usd"),
        ([{"kind": "message", "latency_ms": True}], "trajectory[0].latency_ms"),
        ([{"kind": "message", "content": "a\x00b"}], "trajectory[0].content"),
        ([{"kind": "tool_result", "content": {"k": "\ud800"}}], "trajectory[0].content.k"),
        ("not a list", "trajectory"),
    ],
)
def test_parse_refuses_naming_the_step_and_field(bad, field):
    with pytest.raises(DomainError) as caught:
        trajectory_parse(bad, record="line 4")
    assert caught.value.field == field
    assert caught.value.record == "line 4"


def test_final_state_parse_refuses_nan_and_nul():
    assert final_state_parse({"orders": {"A1": "refunded"}}) == {"orders": {"A1": "refunded"}}
    with pytest.raises(DomainError) as caught:
        final_state_parse({"x": float("inf")})
    assert caught.value.field == "final_state"
    with pytest.raises(DomainError) as caught:
        final_state_parse({"x": ["\x00"]})
    assert caught.value.field == "final_state.x[0]"


def test_clean_replaces_unstorable_text_and_counts_it():
    cleaned, replaced = trajectory_clean([{"kind": "tool_result", "content": "a\x00b\ud800"}])
    assert cleaned[0]["content"] == "a\ufffdb\ufffd"
    assert replaced == 2
    with pytest.raises(TrajectoryError):
        trajectory_clean([{"kind": "tool_call"}])


def test_totals_keep_unknown_as_unknown():
    totals = trajectory_totals(trajectory_parse(STEPS))
    assert totals.steps == 5
    assert totals.tool_calls == 2
    assert totals.tools == ("lookup_order", "issue_refund")
    assert totals.tool_errors == 1
    assert totals.output_tokens == 7
    assert totals.input_tokens is None
    assert totals.cost_usd == pytest.approx(0.001)
    # one model call (a step stating tokens) states no cost; tool results are not calls
    assert totals.cost_unknown == 1
    empty = trajectory_totals(None)
    assert (empty.steps, empty.cost_usd) == (0, None)


def test_result_storable_cleans_steps_and_errors_on_a_malformed_trajectory():
    result = result_storable(
        TargetResult(
            output="done",
            trajectory=[{"kind": "message", "content": "x\x00"}],
            final_state={"k": "\ud800"},
        )
    )
    assert result.ok
    assert result.trajectory[0]["content"] == "x\ufffd"
    assert result.final_state == {"k": "\ufffd"}
    assert result.raw_response[REPLACED_KEY] == {"trajectory": 1, "final_state": 1}

    bad = result_storable(TargetResult(output="done", trajectory=[{"kind": "tool_call"}]))
    assert not bad.ok
    assert bad.error_kind == "malformed_trajectory"
    assert "trajectory[0].name" in bad.error
    assert bad.output == ""

    plain = TargetResult(output="hi")
    assert result_storable(plain) is plain


def test_goal_state_enters_the_content_hash_only_when_set():
    base = content_hash(input="q", expected=None, context=[])
    assert content_hash(input="q", expected=None, context=[], goal_state=None) == base
    assert content_hash(input="q", expected=None, context=[], goal_state={"a": 1}) != base


@registered("pipeline")
def _agent(case, **settings):
    return {
        "output": "refunded",
        "trajectory": [
            {"kind": "tool_call", "name": "lookup_order", "arguments": {"id": case.key}},
            {"kind": "tool_result", "content": "<b>total 30</b>"},
        ],
        "final_state": {"refunded": True},
    }


@registered("pipeline")
def _bad_agent(case, **settings):
    return {"output": "x", "trajectory": [{"kind": "tool_call", "arguments": {}}]}


@pytest.mark.django_db
def test_a_callable_agent_run_stores_trajectory_and_final_state(
    django_capture_on_commit_callbacks,
):
    suite = Suite.objects.create(name="agents")
    Case.objects.create(suite=suite, key="A1", input="refund A1", goal_state={"refunded": True})
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(
            suite=suite,
            name="r",
            target={"kind": "callable", "path": "tests.evals.test_trajectory_steps:_agent"},
            graders=[{"key": "says", "kind": "contains", "config": {"value": "refunded"}}],
            trials_per_case=2,
        )
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    trials = list(Trial.objects.filter(run=run))
    assert len(trials) == 2
    for trial in trials:
        assert trial.final_state == {"refunded": True}
        assert [s["kind"] for s in trial.trajectory] == ["tool_call", "tool_result"]
        assert trial.trajectory[1]["content"] == "<b>total 30</b>"


def _run_callable(path):
    async def go():
        target = target_from_config({"kind": "callable", "path": path})
        try:
            return await target.call(CaseInput(key="A1", input="refund A1"))
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_a_callable_agent_returns_its_trajectory_and_final_state():
    result = _run_callable("tests.evals.test_trajectory_steps:_agent")
    assert result.ok
    assert result.trajectory[0]["arguments"] == {"id": "A1"}
    assert result.trajectory[1]["status"] == "ok"
    assert result.final_state == {"refunded": True}
    assert "trajectory" not in result.raw_response


def test_a_callable_agent_with_a_malformed_trajectory_is_an_errored_trial():
    result = _run_callable("tests.evals.test_trajectory_steps:_bad_agent")
    assert not result.ok
    assert "trajectory[0].name" in result.error
