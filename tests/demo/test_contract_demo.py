"""The demo's contract suite: the simulated test writer run end to end (eager Celery) and
graded by the expense-policy contract; every trial's decision is its fixture's."""

from __future__ import annotations

import io
import json

import pytest

from demo.expense_contract import FIXTURES
from demo.load import contract_suite_load
from demo.management.commands.demo import Command
from demo.story import contract_demo_run
from evals.grading.contract.decisions import run_decisions
from evals.models import Run, Trial
from tests.evals.test_grade_run import DECISION


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_contract_run_decides_each_trial_as_its_fixture(alice):
    suite = contract_suite_load()
    assert contract_suite_load().id == suite.id  # idempotent
    run = contract_demo_run(suite=suite, seed=3000, user=alice, trials=10, timeout=60)
    assert run.status == "succeeded"
    decisions = run_decisions(run=run)
    by_text = {text: name for name, text in FIXTURES.items()}
    # The simulated writer's right answer is canonical JSON of the correct suite.
    outputs = dict(Trial.objects.filter(run=run).values_list("id", "output"))
    for trial_id, decision in decisions.trials.items():
        name = by_text.get(outputs[trial_id])
        if name is None:  # the right answer, as the simulated target writes it
            assert json.loads(outputs[trial_id]) == json.loads(FIXTURES["correct"])
            name = "correct"
        assert decision.decision == {**DECISION, "correct": "review"}[name], name
    assert sum(decisions.counts.values()) == 10
    assert decisions.counts["rejected"] >= 1
    assert decisions.counts["review"] >= 1
    assert decisions.counts["accepted"] == 0


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_demo_command_runs_the_contract_suite_once_and_prints_its_decisions(alice):
    command = Command(stdout=io.StringIO())
    command._demo_contract_run(alice, {"trials": 2, "timeout": 60})
    command._demo_contract_run(alice, {"trials": 2, "timeout": 60})  # reuses the run
    out = command.stdout.getvalue()
    assert Run.objects.filter(suite__name="expense-policy-test-writer").count() == 1
    run = Run.objects.get(suite__name="expense-policy-test-writer")
    c = run_decisions(run=run).counts
    line = f"contract decisions: {c['rejected']} rejected, {c['review']} in review, 0 accepted"
    assert out.count(line) == 2
    assert c["rejected"] + c["review"] == 4
