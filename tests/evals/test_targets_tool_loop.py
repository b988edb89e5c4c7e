"""The tool loop of the OpenAI-compatible target, against a local server that scripts tool
calls (tests/fakellm.py) and once against the shared mock (which cannot: a one-step
trajectory)."""

from __future__ import annotations

import asyncio
import json
import time
from decimal import Decimal

import pytest

from core.errors import DomainError
from evals.models import Case, Run, Suite, Trial
from evals.runner.start import run_start
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAITarget
from evals.runner.targets.tools import tools_declare
from evals.trajectory.steps import trajectory_parse, trajectory_totals
from providers.pricing import BUILTIN_PRICES, Price
from tests.fakellm import FakeLLM, tool_calls_message
from tests.mockllm import mockllm  # noqa: F401 - the fixture

T = "tests.evals.agent_tools"
MODEL = "example-model-1.5"
PRICE = Price(
    input_usd_per_mtok=BUILTIN_PRICES[MODEL][0],
    output_usd_per_mtok=BUILTIN_PRICES[MODEL][1],
    source="built-in",
    pattern=MODEL,
)


async def _known_price(model):
    return PRICE if model == MODEL else None


async def _no_price(model):
    return None


def _config(llm: FakeLLM, *tools: str, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": llm.base_url,
        "model": MODEL,
        "prompt_template": "$input",
        "tools": [f"{T}:{name}" for name in tools],
        "environment": f"{T}:environment",
        "max_attempts": 1,
        **extra,
    }


def _run(config: dict, pricer=_known_price, text: str = "refund order A1"):
    async def go():
        target = OpenAITarget.from_config(config, pricer=pricer)
        try:
            return await target.call(CaseInput(key="A1", input=text))
        finally:
            await target.aclose()

    return asyncio.run(go())


def _tool_turns(body: dict) -> int:
    return sum(1 for m in body["messages"] if m.get("role") == "tool")


def _script(*turns):
    """A responder playing ``turns`` in order, one per model call of a trial (counted by the
    tool messages already in the conversation; each turn here calls one tool)."""

    def respond(body):
        return turns[min(_tool_turns(body), len(turns) - 1)]

    return respond


def test_a_tool_loop_records_steps_runs_tools_on_the_state_and_answers():
    responder = _script(
        tool_calls_message(("lookup_order", {"order_id": "A1"}), content="Checking."),
        tool_calls_message(("issue_refund", {"order_id": "A1", "amount": 30})),
        "Refunded $30.",
    )
    with FakeLLM(responder=responder) as llm:
        result = _run(_config(llm, "lookup_order", "issue_refund"))
        bodies = llm.bodies
    assert result.ok, result.error
    assert result.output == "Refunded $30."
    kinds = [(s["kind"], s.get("name")) for s in result.trajectory]
    assert kinds == [
        ("message", None),
        ("tool_call", "lookup_order"),
        ("tool_result", "lookup_order"),
        ("tool_call", "issue_refund"),
        ("tool_result", "issue_refund"),
        ("message", None),
    ]
    assert result.trajectory[2]["content"] == {"total": 30, "refunded": 0}
    assert result.final_state["orders"]["A1"]["refunded"] == 30
    assert result.final_state["log"] == ["lookup A1", "refund A1 30"]
    # the request format: tools declared, tool_calls answered with role "tool" messages
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["lookup_order", "issue_refund"]
    assert bodies[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": '{"total":30,"refunded":0}',
    }
    assert len(bodies) == 3
    # each model call's tokens, latency and cost on its first step; totals add up
    calls = [s for s in result.trajectory if "cost_usd" in s]
    assert len(calls) == 3
    for step in calls:
        assert step["input_tokens"] > 0 and step["latency_ms"] > 0
        expected = (
            Decimal(step["input_tokens"]) * PRICE.input_usd_per_mtok
            + Decimal(step["output_tokens"]) * PRICE.output_usd_per_mtok
        ) / Decimal(1_000_000)
        assert step["cost_usd"] == pytest.approx(float(expected))
    totals = trajectory_totals(trajectory_parse(result.trajectory))
    assert totals.input_tokens == result.input_tokens
    assert totals.output_tokens == result.output_tokens
    assert totals.tool_calls == 2
    assert result.request["tools"] == bodies[0]["tools"]
    assert result.raw_response["model_calls"] == 3


def test_a_looping_agent_stops_at_the_step_cap_as_an_errored_trial():
    loop_forever = tool_calls_message(("lookup_order", {"order_id": "A1"}))
    with FakeLLM(responder=lambda body: loop_forever) as llm:
        result = _run(_config(llm, "lookup_order", max_steps=3))
        sent = llm.requests
    assert sent == 3
    assert not result.ok
    assert result.error_kind == "step_cap"
    assert "after 3 model calls (max_steps 3)" in result.error
    steps = result.trajectory
    assert [s["kind"] for s in steps] == ["tool_call", "tool_result"] * 3
    assert [s["status"] for s in steps if s["kind"] == "tool_result"] == ["ok", "ok", "error"]
    assert steps[-1]["content"].startswith("not run: step cap")
    assert result.final_state["log"] == ["lookup A1", "lookup A1"]  # the third never ran


def test_a_tool_that_raises_is_a_failed_step_and_the_loop_goes_on():
    responder = _script(tool_calls_message(("boom", {})), "Sorry, the refund failed.")
    with FakeLLM(responder=responder) as llm:
        result = _run(_config(llm, "boom"))
        bodies = llm.bodies
    assert result.ok, result.error
    assert result.output == "Sorry, the refund failed."
    failed = result.trajectory[1]
    assert failed["kind"] == "tool_result" and failed["status"] == "error"
    assert failed["content"] == "RuntimeError: refund service down <script>alert(1)</script>"
    assert bodies[1]["messages"][-1]["content"] == failed["content"]  # the model is told
    assert result.final_state["log"] == []  # a failed call leaves the state as it was
    assert trajectory_totals(result.trajectory).tool_errors == 1


def test_unknown_tools_bad_arguments_and_values_that_are_not_json_are_failed_steps():
    responder = _script(
        tool_calls_message(("drop_tables", {})),
        tool_calls_message(("lookup_order", '{"order_id": ')),
        tool_calls_message(("lookup_order", "[1, 2]")),
        tool_calls_message(("lookup_order", '{"order_id": NaN}')),
        tool_calls_message(("not_json", {})),
        tool_calls_message(("lookup_order", {"order_id": "nope"})),
        "gave up",
    )
    with FakeLLM(responder=responder) as llm:
        result = _run(_config(llm, "lookup_order", "not_json"))
    assert result.ok, result.error
    results = [s for s in result.trajectory if s["kind"] == "tool_result"]
    assert [s["status"] for s in results] == ["error"] * 6
    assert results[0]["content"].startswith("no tool named 'drop_tables'")
    assert results[1]["content"].startswith("arguments are not JSON")
    assert results[2]["content"] == "arguments are not a JSON object"
    assert results[3]["content"].startswith("arguments are not JSON")
    assert results[4]["content"].startswith("TypeError: the tool returned a value that is not")
    assert results[5]["content"] == "KeyError: 'nope'"
    bad_call = result.trajectory[2]
    assert bad_call["arguments"] == {"$unparsed": '{"order_id": '}
    trajectory_parse(result.trajectory)  # storable in the shape


def test_the_cost_cap_ends_the_trial_after_the_call_that_crossed_it():
    loop_forever = tool_calls_message(("lookup_order", {"order_id": "A1"}))
    with FakeLLM(responder=lambda body: loop_forever) as llm:
        # each call costs ~10 input tokens x $0.35/M: about $0.0000035; the cap lets 2 through
        one = _run(_config(llm, "lookup_order", max_steps=50))
        llm.reset()
        capped = _run(_config(llm, "lookup_order", max_steps=50, max_cost_usd=0.0000075))
        sent = llm.requests
    assert one.error_kind == "step_cap"
    assert not capped.ok
    assert capped.error_kind == "cost_cap"
    assert "max_cost_usd $0.0000075)" in capped.error
    costs = [s["cost_usd"] for s in capped.trajectory if s.get("cost_usd") is not None]
    assert len(costs) == sent
    assert sum(costs[:-1]) <= 0.0000075 < sum(costs)
    assert capped.trajectory[-1]["content"].startswith("not run: cost cap")


def test_a_cost_cap_with_an_unknown_price_ends_the_trial_and_unknown_cost_is_null():
    responder = _script(tool_calls_message(("lookup_order", {"order_id": "A1"})), "done")
    with FakeLLM(responder=responder) as llm:
        uncapped = _run(_config(llm, "lookup_order"), pricer=_no_price)
        capped = _run(_config(llm, "lookup_order", max_cost_usd=1), pricer=_no_price)
    assert uncapped.ok
    assert uncapped.trajectory[0]["cost_usd"] is None  # unknown, never zero
    assert trajectory_totals(uncapped.trajectory).cost_usd is None
    assert capped.error_kind == "cost_cap"
    assert "unknown" in capped.error
    assert len(capped.trajectory) == 2


@pytest.mark.parametrize("tool", ["slow", "slow_async"])
def test_a_tool_past_its_timeout_is_a_failed_step_and_changes_nothing(tool):
    responder = _script(tool_calls_message((tool, {"seconds": 1.5})), "moving on")
    with FakeLLM(responder=responder) as llm:
        started = time.perf_counter()
        result = _run(_config(llm, tool, tool_timeout_s=0.2))
        elapsed = time.perf_counter() - started
    assert result.ok, result.error
    failed = result.trajectory[1]
    assert failed["status"] == "error"
    assert failed["content"] == f"TimeoutError: {tool} did not return within 0.2 s"
    assert 150 <= failed["latency_ms"] < 1000
    assert elapsed < 1.4
    time.sleep(1.5)  # the sync tool's thread ends on its own, on a copy nobody reads
    assert result.final_state["log"] == []


def test_a_failed_model_call_ends_the_trial_keeping_the_steps():
    def responder(body):
        if _tool_turns(body):
            return (500, b'{"error": {"message": "upstream down"}}')
        return tool_calls_message(("lookup_order", {"order_id": "A1"}))

    with FakeLLM(responder=responder) as llm:
        result = _run(_config(llm, "lookup_order"))
    assert not result.ok
    assert result.error_kind == "server_error 500"
    assert [s["kind"] for s in result.trajectory] == ["tool_call", "tool_result"]
    assert result.final_state["log"] == ["lookup A1"]


def test_an_environment_that_fails_is_an_errored_trial():
    with FakeLLM() as llm:
        config = _config(llm, "lookup_order", environment=f"{T}:boom")
        result = _run(config)
        assert llm.requests == 0
    assert result.error_kind == "environment"
    assert "TypeError" in result.error or "RuntimeError" in result.error


def test_tool_schemas_come_from_the_signature_or_the_function():
    tools = {t.name: t for t in tools_declare([f"{T}:documented", f"{T}:declared"])}
    doc = tools["documented"].schema["function"]
    assert doc["description"] == "Search the catalogue."
    assert doc["parameters"] == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }
    assert tools["declared"].schema["function"]["parameters"]["properties"] == {
        "x": {"type": "integer"}
    }


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"tools": [f"{T}:lookup_order", f"{T}:missing"]}, "target.tools[1]"),
        ({"tools": [f"{T}:lookup_order", f"{T}:lookup_order"]}, "target.tools[1]"),
        ({"tools": ["no_colon"]}, "target.tools[0]"),
        ({"tools": []}, "target.tools"),
        ({"tools": None, "max_steps": 3}, "target.max_steps"),
        ({"max_steps": 0}, "target.max_steps"),
        ({"max_cost_usd": -1}, "target.max_cost_usd"),
        ({"tool_timeout_s": float("nan")}, "target.tool_timeout_s"),
        ({"environment": "nowhere:fn"}, "target.environment"),
        ({"settings": {"tools": []}}, "target.settings.tools"),
    ],
)
def test_a_bad_tool_loop_config_is_refused_naming_the_field(extra, field):
    config = {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": MODEL,
        "prompt_template": "$input",
        "tools": [f"{T}:lookup_order"],
        **extra,
    }
    with pytest.raises(DomainError) as caught:
        OpenAITarget.from_config(config)
    assert caught.value.field == field


@pytest.mark.django_db
def test_a_tool_loop_run_against_the_shared_mock_stores_a_one_step_trajectory(
    mockllm,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks,
    client,
    alice,
):
    """The shared mock cannot call tools: each trial is one model call, answered at once,
    priced through the run's own price lookup (the default pricer, on the database)."""
    server = mockllm("--latency-ms", "0")
    suite = Suite.objects.create(name="agents")
    Case.objects.create(
        suite=suite,
        key="c1",
        input="[case=c1 p=1.0 expect=ANSWER-c1] refund A1",
        goal_state={"orders": {"A1": {"total": 30, "refunded": 30}}},
    )
    target = {
        "kind": "openai",
        "base_url": server.base_url,
        "model": MODEL,
        "prompt_template": "$input",
        "tools": [f"{T}:lookup_order", f"{T}:issue_refund"],
        "environment": f"{T}:environment",
        "max_steps": 5,
        "max_cost_usd": 0.01,
    }
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(
            suite=suite,
            name="agent",
            target=target,
            graders=[{"key": "says", "kind": "contains", "config": {"value": "ANSWER-c1"}}],
            trials_per_case=2,
        )
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert server.stats()["requests"] == 2
    for trial in Trial.objects.filter(run=run):
        assert trial.status == Trial.Status.OK
        assert [s["kind"] for s in trial.trajectory] == ["message"]
        step = trial.trajectory[0]
        assert step["content"] == trial.output
        assert step["input_tokens"] == trial.input_tokens
        assert step["cost_usd"] == pytest.approx(float(trial.cost_usd))
        assert trial.final_state == {"orders": {"A1": {"total": 30, "refunded": 0}}, "log": []}
        assert [t["function"]["name"] for t in trial.request["tools"]] == [
            "lookup_order",
            "issue_refund",
        ]
        json.dumps(trial.trajectory)
    client.force_login(alice)
    html = client.get(f"/trials/{trial.uuid}/").content.decode()
    assert 'id="trajectory"' in html and 'id="final-state"' in html


AGENT_CONFIG = """
[targets.agent]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "example-model-1.5"
prompt_template = "$input"
tools = ["tests.evals.agent_tools:lookup_order", "{second}"]
environment = "tests.evals.agent_tools:environment"
max_steps = 8
max_cost_usd = 0.02
tool_timeout_s = 5
"""


@pytest.mark.django_db
def test_tools_are_declared_in_a_target_preset_and_a_bad_one_is_refused_naming_it(tmp_path):
    from evals.models import TargetPreset  # noqa: PLC0415 - only here
    from tests.evals.test_config_presets import apply  # noqa: PLC0415 - only here

    apply(tmp_path, AGENT_CONFIG.format(second="tests.evals.agent_tools:issue_refund"))
    config = TargetPreset.objects.get(name="agent").config
    assert config["tools"][1] == "tests.evals.agent_tools:issue_refund"
    assert (config["max_steps"], config["max_cost_usd"]) == (8, 0.02)
    with pytest.raises(Exception) as caught:
        apply(tmp_path, AGENT_CONFIG.format(second="tests.evals.agent_tools:nothing"))
    assert "targets.agent.tools[1]" in str(caught.value)
