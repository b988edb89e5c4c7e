"""The tool loop on both provider protocols (OpenAI chat completions, Anthropic Messages)
against the shared mock's scripted agents: the same trajectory steps, failed steps, caps and
errors on either protocol, the mock's predicted final answers, and a ``mix`` run giving the
same per-script counts and grades; then the adapters' wire shapes
(``evals.runner.targets.tool_protocols``)."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
from collections import Counter

import pytest

from evals.models import Case, Run, Suite, Trial
from evals.runner.start import run_start
from evals.runner.targets import CaseInput
from evals.runner.targets.base import TargetResult
from evals.runner.targets.openai import OpenAITarget
from evals.runner.targets.tool_protocols import TOOL_PROTOCOLS, ToolResult
from evals.runner.targets.tools import tools_declare
from providers.pricing import BUILTIN_PRICES, Price
from tests.azure_front import AzureFront
from tests.mockllm import MOCKLLM, mockllm_start

T = "tests.evals.agent_tools"
MODEL = "example-model-1.5"
PRICE = Price(
    input_usd_per_mtok=BUILTIN_PRICES[MODEL][0],
    output_usd_per_mtok=BUILTIN_PRICES[MODEL][1],
    source="built-in",
    pattern=MODEL,
)
PROTOCOLS = ("openai", "anthropic")
SEED = 1234  # the mock's default
# What the scripted agent does to the mock shop on its correct path (agent_tools.mock_shop).
GOAL = {
    "orders": {"mock": {"total": 1, "refunded": 1.0}},
    "log": ["lookup mock", "refund mock 1.0"],
}
BAD_JSON = "arguments are not JSON: Expecting ',' delimiter: line 1 column 19 (char 18)"
UNDECLARED = "no tool named 'mock_undeclared_tool' (issue_refund, lookup_order)"


def _mock():
    """The mock's own module (its policy: ``expected_outcome``, ``udraw``, the mix's weights)."""
    if not MOCKLLM.exists():
        pytest.skip(f"shared mock not found: {MOCKLLM}")
    spec = importlib.util.spec_from_file_location("assay_mockllm_server", MOCKLLM)
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def _mix_script(case: str, n: int) -> str:
    """The script the mock's ``mix`` plays for trajectory ``n`` of ``case`` (its default mix)."""
    mock = _mock()
    u = mock.udraw(SEED, "G:" + case, n, "agent")
    mix = mock.parse_agent_mix("correct=0.6,wrong_tool=0.1,bad_args=0.1,undeclared=0.1,loop=0.1")
    return next((s for s, c in mix if u < c), mix[-1][0])


def _answer(case: str, n: int, p: float) -> str:
    """The mock's final answer of trajectory ``n`` of ``case``."""
    return f"A-{case}" if _mock().expected_outcome(SEED, case, n, p) else f"WRONG-{case}-{n}"


@pytest.fixture(scope="module")
def servers():
    """One mock per protocol, so a case's answer counter starts at 0 on each."""
    started = {protocol: mockllm_start("--latency-ms", "0") for protocol in PROTOCOLS}
    yield started
    for server in started.values():
        server.stop()


async def _known_price(model):
    return PRICE if model == MODEL else None


async def _no_price(model):
    return None


def _target(protocol: str, base_url: str, **extra) -> dict:
    config = {
        "kind": "openai",
        "base_url": base_url,
        "model": MODEL,
        "api_key_env": None,
        "prompt_template": "$input",
        "tools": [f"{T}:lookup_order", f"{T}:issue_refund"],
        "environment": f"{T}:mock_shop",
        "max_attempts": 1,
        **extra,
    }
    if protocol == "anthropic":
        config = {"provider": "anthropic", "settings": {"max_tokens": 256}, **config}
    return config


def _run(config: dict, text: str, pricer=_known_price) -> TargetResult:
    async def go():
        target = OpenAITarget.from_config(config, pricer=pricer)
        try:
            return await target.call(CaseInput(key="k", input=text))
        finally:
            await target.aclose()

    return asyncio.run(go())


def _both(servers, text: str, pricer=_known_price, **extra) -> dict[str, TargetResult]:
    return {
        protocol: _run(_target(protocol, servers[protocol].base_url, **extra), text, pricer)
        for protocol in PROTOCOLS
    }


def _plain(steps: list[dict]) -> list[dict]:
    """Steps without what differs by protocol or by call: ids (``call_`` / ``toolu_``) and the
    model calls' figures."""
    drop = {"id", "input_tokens", "output_tokens", "latency_ms", "cost_usd"}
    return [{k: v for k, v in step.items() if k not in drop} for step in steps]


def _shape(steps: list[dict]) -> list[tuple]:
    return [(s["kind"], s.get("name"), s.get("status")) for s in steps]


@pytest.mark.parametrize(
    ("script", "calls", "failed"),
    [
        ("correct", ["lookup_order", "issue_refund"], {}),
        ("wrong_tool", ["issue_refund", "lookup_order", "issue_refund"], {}),
        ("bad_args", ["lookup_order", "lookup_order", "issue_refund"], {0: BAD_JSON}),
        ("undeclared", ["mock_undeclared_tool", "lookup_order", "issue_refund"], {0: UNDECLARED}),
    ],
)
def test_each_script_makes_the_same_steps_and_the_predicted_answer_on_both_protocols(
    servers, script, calls, failed
):
    case = f"tl-{script}"
    results = _both(servers, f"[case={case} p=0.5 expect=A-{case}] MOCK_AGENT:{script} refund")
    for protocol, result in results.items():
        assert result.ok, (protocol, result.error)
        assert result.output == _answer(case, 0, 0.5)  # trajectory 0's answer, as predicted
        expected = []
        for i, name in enumerate(calls):
            status = "error" if i in failed else "ok"
            expected += [("tool_call", name, None), ("tool_result", name, status)]
        assert _shape(result.trajectory) == [*expected, ("message", None, None)]
        results_ = [s for s in result.trajectory if s["kind"] == "tool_result"]
        for i, says in failed.items():
            assert results_[i]["content"] == says
        prefix = "call" if protocol == "openai" else "toolu"
        assert result.trajectory[0]["id"] == f"{prefix}_mock_0_0"
        ids = [s["id"] for s in result.trajectory if "id" in s]
        assert ids[0::2] == ids[1::2]  # each result answers its call
        assert ids[0::2] == [f"{prefix}_mock_0_{turn}" for turn in range(len(calls))]
        assert result.raw_response["model_calls"] == len(calls) + 1
        # every model call's figures on its first step, priced
        priced = [s for s in result.trajectory if "cost_usd" in s]
        assert len(priced) == len(calls) + 1
        assert all(s["input_tokens"] > 0 and s["cost_usd"] > 0 for s in priced)
    assert _plain(results["openai"].trajectory) == _plain(results["anthropic"].trajectory)
    assert results["openai"].final_state == results["anthropic"].final_state
    if script in ("correct", "bad_args", "undeclared"):
        assert results["anthropic"].final_state == GOAL
    anthropic = results["anthropic"]
    assert anthropic.request["tools"][0] == {
        "name": "lookup_order",
        "description": "Look an order up by id.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    }
    assert anthropic.raw_response["last_reply"]["stop_reason"] == "end_turn"
    assert results["openai"].request["tools"][0]["function"]["name"] == "lookup_order"


def test_a_looping_agent_stops_at_the_step_cap_with_the_same_error_on_both_protocols(servers):
    results = _both(servers, "[case=tl-loop p=0.5] MOCK_AGENT:loop", max_steps=3)
    for result in results.values():
        assert result.error_kind == "step_cap"
        assert result.error == (
            "step_cap: step cap: the model still called tools after 3 model calls (max_steps 3)"
        )
        assert _shape(result.trajectory) == [
            ("tool_call", "lookup_order", None),
            ("tool_result", "lookup_order", "ok"),
        ] * 2 + [("tool_call", "lookup_order", None), ("tool_result", "lookup_order", "error")]
        assert result.final_state["log"] == ["lookup mock", "lookup mock"]  # the third never ran
    assert results["anthropic"].raw_response["last_reply"]["stop_reason"] == "tool_use"
    assert _plain(results["openai"].trajectory) == _plain(results["anthropic"].trajectory)


def test_the_cost_cap_and_an_unknown_price_under_it_end_the_trial_on_both_protocols(servers):
    capped = _both(servers, "[case=tl-cost] MOCK_AGENT:loop", max_steps=50, max_cost_usd=4e-5)
    unknown = _both(servers, "[case=tl-unknown] MOCK_AGENT:loop", _no_price, max_cost_usd=1)
    for protocol in PROTOCOLS:
        result = capped[protocol]
        assert result.error_kind == "cost_cap", protocol
        assert "(max_cost_usd $0.000040)" in result.error
        costs = [s["cost_usd"] for s in result.trajectory if "cost_usd" in s]
        assert len(costs) >= 2
        assert sum(costs[:-1]) <= 4e-5 < sum(costs)  # stopped after the call that crossed it
        assert result.trajectory[-1]["content"].startswith("not run: cost cap")
        assert unknown[protocol].error_kind == "cost_cap"
        assert "is unknown" in unknown[protocol].error
        assert [s["cost_usd"] for s in unknown[protocol].trajectory if "cost_usd" in s] == [None]


def test_a_failed_model_call_ends_the_trial_keeping_its_steps_on_both_protocols():
    """The mock's fault draw is fixed by (seed, case, request): a case whose first request is
    answered and whose second is a 500."""
    mock = _mock()
    case = next(
        f"tl-fail-{i}"
        for i in range(200)
        if mock.udraw(SEED, f"A:tl-fail-{i}", 0, "fault") >= 0.5
        and mock.udraw(SEED, f"A:tl-fail-{i}", 1, "fault") < 0.5
    )
    for protocol in PROTOCOLS:
        server = mockllm_start("--latency-ms", "0", "--p500", "0.5")
        try:
            result = _run(_target(protocol, server.base_url), f"[case={case}] MOCK_AGENT:correct")
        finally:
            server.stop()
        assert result.error_kind == "server_error 500", protocol
        assert _shape(result.trajectory) == [
            ("tool_call", "lookup_order", None),
            ("tool_result", "lookup_order", "ok"),
        ]
        assert result.final_state["log"] == ["lookup mock"]


# Keys whose 6 trajectories each draw every script of the mix at least twice (seed 1234).
MIX_CASES = [("mix-0", 1.0), ("mix-1", 0.7), ("mix-2", 0.5), ("mix-3", 0.3), ("mix-4", 0.0)]
MIX_TRIALS = 6
MIX_GRADERS = [
    {"key": "says", "kind": "exact"},
    {"key": "outcome", "kind": "state", "config": {"mode": "exact"}},
    {
        "key": "path",
        "kind": "trajectory",
        "config": {
            "required": ["lookup_order"],
            "forbidden": ["mock_undeclared_tool"],
            "before": [["lookup_order", "issue_refund"]],
        },
    },
]


def _mix_run(server, protocol: str) -> Run:
    suite = Suite.objects.create(name=f"mix-{protocol}")
    for key, p in MIX_CASES:
        Case.objects.create(
            suite=suite,
            key=key,
            input=f"[case={key} p={p} expect=A-{key}] MOCK_AGENT:mix refund",
            expected=f"A-{key}",
            goal_state=GOAL,
        )
    return run_start(
        suite=suite,
        name="mix",
        target=_target(protocol, server.base_url, max_steps=5),
        graders=MIX_GRADERS,
        trials_per_case=MIX_TRIALS,
    )


def _per_script(run: Run) -> tuple[Counter, Counter]:
    """``(trials, grades)``: per (script, error kind, failed steps) the trials, per (script,
    grader, passed, reason) the grades; each trial's script read from its mock call ids' n."""
    trials, grades = Counter(), Counter()
    for trial in Trial.objects.filter(run=run).select_related("case").prefetch_related("grades"):
        n = int(re.search(r"_mock_(\d+)_0$", trial.trajectory[0]["id"]).group(1))
        script = _mix_script(trial.case.key, n)
        failed = sum(1 for s in trial.trajectory if s.get("status") == "error")
        trials[(script, trial.error_message.partition(":")[0], failed)] += 1
        for grade in trial.grades.all():
            grades[(script, grade.grader, grade.passed, grade.reason)] += 1
    return trials, grades


@pytest.mark.django_db
def test_a_mix_run_gives_the_same_per_script_counts_and_predicted_passes_on_both_protocols(
    servers, django_capture_on_commit_callbacks
):
    counts = {}
    for protocol in PROTOCOLS:
        with django_capture_on_commit_callbacks(execute=True):
            run = _mix_run(servers[protocol], protocol)
        run.refresh_from_db()
        assert run.status in (Run.Status.SUCCEEDED, Run.Status.FAILED)
        counts[protocol] = _per_script(run)
    assert counts["openai"] == counts["anthropic"]
    trials, grades = counts["anthropic"]
    predicted = Counter()
    for key, p in MIX_CASES:
        for n in range(MIX_TRIALS):
            script = _mix_script(key, n)
            if script != "loop":
                predicted[(script, "says", _answer(key, n, p) == f"A-{key}")] += 1
    passes = Counter()
    for (script, grader, passed, _), count in grades.items():
        passes[(script, grader, passed)] += count
    assert {k: v for k, v in passes.items() if k[1] == "says"} == predicted
    for (script, kind, failed), _count in trials.items():
        assert kind == ("step_cap" if script == "loop" else ""), script
        assert failed == {"bad_args": 1, "undeclared": 1, "loop": 1}.get(script, 0), script
    for script, grader, passed in passes:
        if grader == "outcome":
            assert passed is (script != "wrong_tool"), script
        if grader == "path":
            assert passed is (script in ("correct", "bad_args")), script
    assert sum(trials.values()) == len(MIX_CASES) * MIX_TRIALS
    assert Counter(script for script, _, _ in trials.elements()) == Counter(
        _mix_script(key, n) for key, _ in MIX_CASES for n in range(MIX_TRIALS)
    )
    assert {script for script, _, _ in trials} == {
        "correct",
        "wrong_tool",
        "bad_args",
        "undeclared",
        "loop",
    }


# -- the adapters' wire shapes ---------------------------------------------------------------


def _anthropic_reply(*blocks: dict, stop_reason: str = "tool_use") -> TargetResult:
    return TargetResult(
        output="",
        raw_response={"content": list(blocks), "stop_reason": stop_reason},
    )


def test_an_anthropic_reply_becomes_text_and_calls_and_goes_back_as_blocks():
    adapter = TOOL_PROTOCOLS["anthropic"]
    thinking = {"type": "thinking", "thinking": "hm", "signature": "sig"}
    result = _anthropic_reply(
        thinking,
        {"type": "text", "text": "Looking "},
        {"type": "text", "text": "it up."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"order_id": "A1"}},
        {"type": "tool_use", "id": "toolu_2", "name": "boom", "input": "[1]"},
        {"type": "tool_use", "id": "toolu_3", "name": "boom", "input": 7},
    )
    content, calls = adapter.reply(result)
    assert content == "Looking it up."
    assert [(c["id"], c["name"], c["arguments"], c["problem"]) for c in calls] == [
        ("toolu_1", "lookup_order", {"order_id": "A1"}, None),
        ("toolu_2", "boom", {"$unparsed": "[1]"}, "arguments are not a JSON object"),
        ("toolu_3", "boom", {"$unparsed": "7"}, "arguments are not a JSON object"),
    ]
    sent = adapter.assistant_message(result, content, calls)
    assert sent == {"role": "assistant", "content": result.raw_response["content"]}
    back = adapter.results_messages(
        [ToolResult(call=calls[0], ok=True, text="{}"), ToolResult(calls[1], False, "nope")]
    )
    assert back == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{}"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "nope",
                    "is_error": True,
                },
            ],
        }
    ]


def test_bad_arguments_read_the_same_on_both_protocols():
    text = '{"order_id": '
    openai = {"id": "c", "function": {"name": "f", "arguments": text}}
    _, [from_openai] = TOOL_PROTOCOLS["openai"].reply(
        TargetResult(output="", raw_response={"choices": [{"message": {"tool_calls": [openai]}}]})
    )
    _, [from_anthropic] = TOOL_PROTOCOLS["anthropic"].reply(
        _anthropic_reply({"type": "tool_use", "id": "c", "name": "f", "input": text})
    )
    assert from_openai == from_anthropic
    assert from_anthropic["problem"].startswith("arguments are not JSON: Expecting value")


def test_null_arguments_are_not_an_object_and_never_reach_a_tool_on_either_protocol():
    """A JSON ``null`` once became ``{"$unparsed": "null"}`` keyword arguments, run by a tool
    taking ``**kwargs``."""
    openai = {"id": "c", "function": {"name": "f", "arguments": "null"}}
    _, [from_openai] = TOOL_PROTOCOLS["openai"].reply(
        TargetResult(output="", raw_response={"choices": [{"message": {"tool_calls": [openai]}}]})
    )
    _, calls = TOOL_PROTOCOLS["anthropic"].reply(
        _anthropic_reply(
            {"type": "tool_use", "id": "c", "name": "f", "input": "null"},
            {"type": "tool_use", "id": "d", "name": "f", "input": None},
        )
    )
    for call in (from_openai, *calls):
        assert call["problem"] == "arguments are not a JSON object"


def test_a_tool_use_cut_off_at_max_tokens_is_never_run_and_long_ids_are_cut_alike():
    adapter = TOOL_PROTOCOLS["anthropic"]
    result = _anthropic_reply(
        {"type": "tool_use", "id": "t" * 300, "name": "n" * 300, "input": {"a": 1}},
        {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
        stop_reason="max_tokens",
    )
    _, calls = adapter.reply(result)
    assert [c["problem"] for c in calls] == [
        None,
        "arguments cut off: the reply stopped at max_tokens inside this call",
    ]
    assert len(calls[0]["id"]) == len(calls[0]["name"]) == 200
    sent = adapter.assistant_message(result, None, calls)["content"][0]
    assert (sent["id"], sent["name"]) == (calls[0]["id"], calls[0]["name"])  # as the result's


def test_anthropic_tool_declarations_come_from_the_same_tools():
    tools = tools_declare([f"{T}:documented", f"{T}:declared"])
    assert TOOL_PROTOCOLS["anthropic"].declarations(tools) == [
        {
            "name": "documented",
            "description": "Search the catalogue.",
            "input_schema": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query"],
            },
        },
        {
            "name": "declared",
            "description": "A tool with its own schema",
            "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
    ]
    assert TOOL_PROTOCOLS["openai"].declarations(tools) == [t.schema for t in tools]


def test_an_azure_target_runs_the_tool_loop_as_openai_does(servers):
    """Azure OpenAI speaks OpenAI's protocol at a deployment's URL: the same loop, the same
    steps (through the test's Azure front to a mock of its own, so its counter starts at 0)."""
    server = mockllm_start("--latency-ms", "0")
    try:
        with AzureFront(server.base_url, deployments={"tools-dep": MODEL}, api_key=None) as front:
            case = "tl-azure"
            text = f"[case={case} p=0.5 expect=A-{case}] MOCK_AGENT:correct refund"
            azure = _run(
                {
                    **_target("openai", front.base_url),
                    "provider": "azure",
                    "deployment": "tools-dep",
                    "api_version": "2024-10-21",
                },
                text,
            )
            requests = list(front.requests)
    finally:
        server.stop()
    openai = _run(_target("openai", servers["openai"].base_url), text)
    assert azure.ok, azure.error
    assert azure.output == _answer(case, 0, 0.5)
    assert _plain(azure.trajectory) == _plain(openai.trajectory)
    assert azure.final_state == openai.final_state == GOAL
    assert len(requests) == 3  # two tool turns and the answer, each at the deployment's URL
    assert {r["path"] for r in requests} == {"/openai/deployments/tools-dep/chat/completions"}
