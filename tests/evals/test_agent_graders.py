"""The agent graders: ``state`` (outcome, a JSON diff) and ``trajectory`` (the path), their
config checks, reasons in reviewer's words, errored grades when they cannot judge, the
non-gating default of ``trajectory``, and the ladder reading trajectories only for them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.errors import DomainError
from evals.grading.agent.data import AgentData
from evals.grading.grader_config import grader_set_resolved, parse_grader_specs
from evals.grading.grader_set import GraderSet
from evals.grading.graders import run_grader
from evals.grading.ladder import grades_record
from evals.models import Case, Grade, Run, Suite, Trial, content_hash
from evals.runner.targets.base import CaseInput

GOAL = {"order": {"id": "A1", "status": "refunded"}, "refunds": [{"amount": 30}]}
RIGHT_PATH = [
    {"kind": "message", "content": "Looking up the order.", "output_tokens": 5, "cost_usd": 0.001},
    {
        "kind": "tool_call",
        "name": "lookup_order",
        "arguments": {"order_id": "A1"},
        "id": "c1",
        "input_tokens": 20,
        "output_tokens": 5,
        "cost_usd": 0.002,
    },
    {"kind": "tool_result", "id": "c1", "content": '{"id": "A1", "total": 30.5}'},
    {
        "kind": "tool_call",
        "name": "issue_refund",
        "arguments": {"order_id": "A1", "amount": 30},
        "input_tokens": 30,
        "output_tokens": 5,
        "cost_usd": 0.002,
    },
    {"kind": "tool_result", "name": "issue_refund", "content": {"ok": True}},
]
FORBIDDEN_PATH = [RIGHT_PATH[3], RIGHT_PATH[4], RIGHT_PATH[1], RIGHT_PATH[2]]
RULES = {
    "required": ["lookup_order"],
    "forbidden": ["escalate"],
    "before": [["lookup_order", "issue_refund"]],
    "arguments": [
        {
            "tool": "issue_refund",
            "check": "issue_refund.amount <= results.lookup_order.total",
            "name": "refund within the order total",
        }
    ],
    "max_steps": 10,
}


def grade(kind, config, *, goal=None, trajectory=None, final_state=None, gating=None):
    item = {"key": "g", "kind": kind, "config": config}
    if gating is not None:
        item["gating"] = gating
    (spec,) = parse_grader_specs([item])
    case = CaseInput(key="c1", input="refund A1", goal_state=goal)
    return run_grader(spec, case=case, output="done", agent=AgentData(trajectory, final_state))


def test_state_exact_pass_and_diff_reason():
    assert grade("state", {}, goal=GOAL, final_state=GOAL).passed is True
    got = {"order": {"id": "A1", "status": "open"}, "refunds": [], "note": "x"}
    result = grade("state", {}, goal=GOAL, final_state=got)
    assert result.passed is False
    assert 'different `order.status` (goal "refunded", got "open")' in result.reason
    assert "different `refunds`" in result.reason
    assert "unexpected `note`" in result.reason
    assert (
        result.details["group"]
        == "different `order.status`; different `refunds`; unexpected `note`"
    )


def test_state_subset_ignores_extra_keys_but_not_missing_ones():
    got = {**GOAL, "audit": ["x"], "order": {**GOAL["order"], "updated": 3}}
    assert grade("state", {"mode": "subset"}, goal=GOAL, final_state=got).passed is True
    assert grade("state", {}, goal=GOAL, final_state=got).passed is False
    missing = grade("state", {"mode": "subset"}, goal=GOAL, final_state={"order": GOAL["order"]})
    assert missing.passed is False and "missing `refunds`" in missing.reason


def test_state_numbers_by_value_booleans_apart_and_ignore_paths():
    assert grade("state", {}, goal={"a": 10}, final_state={"a": 10.0}).passed is True
    assert grade("state", {}, goal={"a": 1}, final_state={"a": True}).passed is False
    config = {"ignore": ["order.updated_at", "refunds[0].id"]}
    goal = {"order": {"updated_at": 1}, "refunds": [{"id": "r1", "amount": 3}]}
    got = {"order": {"updated_at": 2}, "refunds": [{"id": "r9", "amount": 3}]}
    assert grade("state", config, goal=goal, final_state=got).passed is True


def test_state_cannot_judge_without_final_or_goal_state():
    no_final = grade("state", {}, goal=GOAL, final_state=None)
    assert no_final.passed is None and no_final.status == "error"
    assert "no final state" in no_final.reason
    no_goal = grade("state", {}, goal=None, final_state=GOAL)
    assert no_goal.passed is None and "no goal state" in no_goal.reason
    # the config's goal stands in for the case's
    assert grade("state", {"goal": GOAL}, goal=None, final_state=GOAL).passed is True


def test_trajectory_pass_on_the_expected_path():
    result = grade("trajectory", RULES, trajectory=RIGHT_PATH)
    assert result.passed is True, result.reason
    assert result.details["tools"] == ["lookup_order", "issue_refund"]


def test_trajectory_lists_every_violation_in_words():
    steps = [
        *FORBIDDEN_PATH,
        {"kind": "tool_call", "name": "escalate", "arguments": {}},
        {"kind": "tool_call", "name": "issue_refund", "arguments": {"amount": 99}},
    ]
    result = grade("trajectory", {**RULES, "max_steps": 5}, trajectory=steps)
    assert result.passed is False
    reason = result.reason
    assert "forbidden tool `escalate` called (step 5)" in reason
    assert "forbidden tool `issue_refund` called before `lookup_order` (step 1)" in reason
    assert "argument check `refund within the order total` could not be checked on call 1" in reason
    assert (
        "argument check `refund within the order total` false on call 2 of `issue_refund`" in reason
    )
    assert "6 steps, over the maximum 5" in reason
    assert result.details["group"].startswith("forbidden tool `escalate` called")


def test_trajectory_order_is_a_required_subsequence():
    config = {"order": ["lookup_order", "issue_refund"]}
    assert grade("trajectory", config, trajectory=RIGHT_PATH).passed is True
    result = grade("trajectory", config, trajectory=FORBIDDEN_PATH)
    assert result.passed is False
    assert "`issue_refund` never called after `lookup_order`" in result.reason


def test_trajectory_unknown_cost_is_not_zero():
    steps = [dict(RIGHT_PATH[1]), RIGHT_PATH[2], {**RIGHT_PATH[3], "cost_usd": None}]
    result = grade("trajectory", {"max_cost_usd": 0.01}, trajectory=steps)
    assert result.passed is None and result.status == "error"
    assert "1 of 2 model steps state no cost" in result.reason
    assert "unknown is not zero" in result.reason
    over = grade("trajectory", {"max_cost_usd": 0.001}, trajectory=steps)
    assert over.passed is False and "at least: 1 of 2 model steps state none" in over.reason
    assert grade("trajectory", {"max_cost_usd": 0.01}, trajectory=RIGHT_PATH).passed is True
    tokens = grade("trajectory", {"max_tokens": 40}, trajectory=RIGHT_PATH)
    assert tokens.passed is False and "tokens 65 over the maximum 40" in tokens.reason


def test_a_tiny_cost_cap_is_said_in_plain_dollars_never_e_notation():
    steps = [dict(RIGHT_PATH[1]), RIGHT_PATH[2], {**RIGHT_PATH[3], "cost_usd": 0.0000004}]
    steps[0]["cost_usd"] = 0.0000002
    over = grade("trajectory", {"max_cost_usd": 0.0000005}, trajectory=steps)
    assert over.passed is False
    assert over.reason == "cost $0.0000006 over the maximum $0.0000005"  # it was "$6e-07"


def test_trajectory_cannot_judge_without_trajectory_or_with_a_broken_check():
    assert grade("trajectory", RULES, trajectory=None).passed is None
    broken = {"arguments": [{"tool": "issue_refund", "check": "args.amount + 'x' > 1"}]}
    result = grade("trajectory", broken, trajectory=RIGHT_PATH)
    assert result.passed is None and "broke on call 1 of `issue_refund`" in result.reason
    not_bool = {"arguments": [{"tool": "issue_refund", "check": "args.amount"}]}
    assert grade("trajectory", not_bool, trajectory=RIGHT_PATH).passed is None


@pytest.mark.parametrize(
    ("kind", "config", "field"),
    [
        ("state", {"mode": "loose"}, "graders[0].config.mode"),
        ("state", {"ignore": ["a..b"]}, "graders[0].config.ignore[0]"),
        ("state", {"extra": 1}, "graders[0].config.extra"),
        ("trajectory", {}, "graders[0].config"),
        ("trajectory", {"required": []}, "graders[0].config.required"),
        ("trajectory", {"required": ["a"], "forbidden": ["a"]}, "graders[0].config.forbidden"),
        ("trajectory", {"before": [["a", "a"]]}, "graders[0].config.before[0]"),
        (
            "trajectory",
            {"arguments": [{"tool": "t", "check": "a <"}]},
            "graders[0].config.arguments[0].check",
        ),
        ("trajectory", {"arguments": [{"tool": "t"}]}, "graders[0].config.arguments[0].check"),
        ("trajectory", {"max_steps": -1}, "graders[0].config.max_steps"),
        ("trajectory", {"max_steps": True}, "graders[0].config.max_steps"),
        ("trajectory", {"max_cost_usd": float("nan")}, "graders[0].config.max_cost_usd"),
    ],
)
def test_config_errors_name_the_field(kind, config, field):
    with pytest.raises(DomainError) as info:
        parse_grader_specs([{"key": "g", "kind": kind, "config": config}])
    assert info.value.field == field


def test_trajectory_is_non_gating_unless_the_set_says_so():
    raw = [
        {"key": "outcome", "kind": "state"},
        {"key": "path", "kind": "trajectory", "config": {"required": ["x"]}},
        {"key": "strict_path", "kind": "trajectory", "config": {"required": ["x"]}, "gating": True},
    ]
    specs = parse_grader_specs(raw)
    assert [s.gating for s in specs] == [True, False, True]
    stored = grader_set_resolved(raw, specs)
    assert stored[1]["gating"] is False and "gating" not in stored[0]
    assert GraderSet.from_stored(raw).gating_keys == ("outcome", "strict_path")


def test_agent_grader_without_agent_data_is_errored():
    (spec,) = parse_grader_specs([{"key": "g", "kind": "state"}])
    result = run_grader(spec, case=CaseInput(key="c", input="q", goal_state=GOAL), output="")
    assert result.passed is None and result.status == "error"


@pytest.mark.django_db
def test_ladder_reads_trajectories_only_for_agent_graders():
    suite = Suite.objects.create(name="agents")
    case = Case.objects.create(
        suite=suite,
        key="c1",
        input="refund A1",
        goal_state=GOAL,
        content_hash=content_hash(input="refund A1", expected=None, context=[], goal_state=GOAL),
    )
    run = Run.objects.create(suite=suite, name="r", target_kind="callable", graders=[])
    trial = Trial.objects.create(
        run=run,
        case=case,
        attempt=1,
        status=Trial.Status.OK,
        output="done",
        trajectory=FORBIDDEN_PATH,
        final_state=GOAL,
    )
    plain = parse_grader_specs([{"key": "has", "kind": "contains", "config": {"value": "done"}}])
    loaded = (
        Trial.objects.filter(id=trial.id)
        .select_related("case")
        .defer("trajectory", "final_state")[0]
    )
    with CaptureQueriesContext(connection) as ctx:
        grades_record(trials=[loaded], specs=plain)
    assert not any("trajectory" in q["sql"] for q in ctx.captured_queries)
    agents = parse_grader_specs(
        [
            {"key": "outcome", "kind": "state"},
            {"key": "path", "kind": "trajectory", "config": RULES},
        ]
    )
    with CaptureQueriesContext(connection) as ctx:
        grades_record(trials=[loaded], specs=agents)
    assert sum("trajectory" in q["sql"] for q in ctx.captured_queries) == 1
    grades = {g.grader: g for g in Grade.objects.filter(trial=trial)}
    assert grades["outcome"].passed is True
    assert grades["path"].passed is False and grades["path"].gating is False
    assert "forbidden tool `issue_refund` called before `lookup_order`" in grades["path"].reason


def test_untrusted_names_and_keys_are_cut_in_reasons():
    huge = "x" * 100_000
    steps = [{"kind": "tool_call", "name": huge, "arguments": {}}]
    result = grade("trajectory", {"order": ["lookup_order"]}, trajectory=steps)
    assert result.passed is False and len(result.reason) < 1000
    state = grade("state", {}, goal={"a": 1}, final_state={"a": 1, huge: "<script>" * 1000})
    assert state.passed is False and len(state.reason) < 1000
    assert state.details["differences"][0]["path"].endswith("…")
