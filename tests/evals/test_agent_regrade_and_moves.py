"""The agent 2 × 2 after a corrected grader (``run_grade``), and its movement base -> head
in a comparison (page, CSV, API, gate JSON)."""

from __future__ import annotations

import pytest

from evals.grading.recorded import run_grade
from evals.models import Trial
from evals.report.selectors import run_report
from tests.evals.test_agent_report import agent_run
from tests.report_builders import ERR

pytestmark = pytest.mark.django_db

LOOKED_UP = [
    {"kind": "tool_call", "name": "lookup_order", "arguments": {}},
    {"kind": "tool_result", "content": "ok"},
]
SKIPPED = [{"kind": "tool_call", "name": "issue_refund", "arguments": {}}]


def test_grading_again_with_a_corrected_path_grader_fills_the_two_by_two():
    run = agent_run({"c1": [(True, ERR), (True, ERR), (False, ERR)]})
    for trial, steps in zip(
        Trial.objects.filter(run=run).order_by("attempt"),
        [LOOKED_UP, SKIPPED, LOOKED_UP],
        strict=True,
    ):
        trial.trajectory = steps
        trial.save(update_fields=["trajectory"])
    before = run_report(run=run).to_dict()["agents"]
    assert before["in_table"] == 0 and before["left_out"] == 3

    fixed = {"key": "path_v2", "kind": "trajectory", "config": {"required": ["lookup_order"]}}
    run_grade(run=run, graders=[fixed])
    agents = run_report(run=run).to_dict()["agents"]
    assert agents["path_keys"] == ["path_v2"]  # the grader that judged nothing is set aside
    assert agents["in_table"] == 3 and agents["left_out"] == 0
    cells = [agents[c]["trials"] for c in ("both_pass", "outcome_only", "path_only", "both_fail")]
    assert cells == [1, 1, 1, 0]
