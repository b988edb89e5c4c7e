"""The demo's agent suite: the simulated refund agent run end to end (eager Celery), graded
by ``state`` and ``trajectory``; its report shows both kinds of disagreement and pass^k
falling with k."""

from __future__ import annotations

import io

import pytest

from demo.load import agent_suite_load
from demo.management.commands.demo import Command
from demo.refund_agent import CASES, ORDERS, goal_state, refund_agent
from demo.story import agent_demo_run
from evals.models import CaseChange, Run, Trial
from evals.report.agents import RIGHT_OUTCOME_WRONG_PATH, WRONG_OUTCOME_EXPECTED_PATH
from evals.report.selectors import run_report
from evals.runner.targets.base import CaseInput


def test_the_agent_is_seeded_and_follows_the_policy_on_its_expected_path():
    case = CaseInput(key="refund-mid", input={"order_id": "A101", "message": "refund"}, attempt=2)
    assert refund_agent(case, seed=7) == refund_agent(case, seed=7)
    seen = {refund_agent(case, seed=s)["trajectory"][1]["name"] for s in range(40)}
    assert seen == {"lookup_order", "issue_refund"}  # both paths occur
    assert goal_state("A104")["order"]["status"] == "escalated"  # above $500
    assert goal_state("A103")["refunds"] == []  # past the window
    assert set(CASES) and all(CASES[k][0] in ORDERS for k in CASES)
    # The trial's tokens are its model steps' sums (the trial page read "? in / ? out"
    # above a trajectory that stated every step's tokens).
    result = refund_agent(case, seed=7)
    steps = [s for s in result["trajectory"] if "input_tokens" in s]
    assert len(steps) >= 2
    assert result["input_tokens"] == sum(s["input_tokens"] for s in steps)
    assert result["output_tokens"] == sum(s["output_tokens"] for s in steps)
    assert result["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in steps))


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_agent_run_report_shows_disagreements_of_both_kinds(alice):
    suite = agent_suite_load()
    assert agent_suite_load().id == suite.id  # idempotent
    # The suite page's history names the path (it showed an empty one for these cases).
    assert set(CaseChange.objects.filter(suite=suite).values_list("via", flat=True)) == {"demo"}
    run = agent_demo_run(suite=suite, seed=4000, user=alice, trials=10, timeout=60)
    assert run.status == "succeeded"
    assert Trial.objects.filter(run=run, trajectory__isnull=True).count() == 0
    assert Trial.objects.filter(run=run, input_tokens__isnull=True).count() == 0
    assert Trial.objects.filter(run=run, status="ok", cost_usd__isnull=True).count() == 0
    report = run_report(run=run).to_dict()
    agents = report["agents"]
    assert agents["outcome_keys"] == ["outcome"] and agents["path_keys"] == ["path"]
    assert agents["outcome_only"]["trials"] >= 1
    assert agents["path_only"]["trials"] >= 1
    kinds = {g["kind"] for g in agents["groups"]}
    assert kinds == {RIGHT_OUTCOME_WRONG_PATH, WRONG_OUTCOME_EXPECTED_PATH}
    labels = [g["label"] for g in agents["groups"]]
    assert "right outcome via forbidden tool `issue_refund` before `lookup_order`" in labels
    assert any(lb.startswith("outcome fail on the expected path: ") for lb in labels)
    # the overall verdict is the outcome: the path grader does not gate
    assert report["overall"]["trials_passed"] == agents["outcome"]["trials_passed"]
    assert agents["path_gating"] is False
    hat = [p["pass_hat_k"] for p in agents["outcome"]["pass_k"]]
    assert hat[0] > hat[4] > hat[9]  # pass^k falls with k
    total = sum(
        agents[c]["trials"] for c in ("both_pass", "outcome_only", "path_only", "both_fail")
    )
    assert total == agents["in_table"] == 80
    for cell in ("both_pass", "outcome_only", "path_only", "both_fail"):
        assert agents[cell]["low"] < agents[cell]["high"]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_demo_command_runs_the_agent_suite_once(alice):
    command = Command(stdout=io.StringIO())
    command._demo_agent_run(alice, {"trials": 2, "timeout": 60})
    command._demo_agent_run(alice, {"trials": 2, "timeout": 60})  # reuses the run
    assert Run.objects.filter(suite__name="refund-agent").count() == 1
    out = command.stdout.getvalue()
    assert out.count("wrong outcome on the expected path") == 2
