"""The agent 2 × 2 after a corrected grader (``run_grade``), and its movement base -> head
in a comparison (page, CSV, API, gate JSON)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evals.grading.recorded import run_grade
from evals.models import Trial
from evals.report.selectors import run_report
from tests.core.test_api_core import client_for
from tests.evals.test_agent_report import agent_run
from tests.evals.test_api_comparisons import comparison_url
from tests.report_builders import ERR

pytestmark = pytest.mark.django_db

LOOKED_UP = [
    {"kind": "tool_call", "name": "lookup_order", "arguments": {}},
    {"kind": "tool_result", "content": "ok"},
]
SKIPPED = [{"kind": "tool_call", "name": "issue_refund", "arguments": {}}]


def test_grading_again_with_a_corrected_path_grader_fills_the_two_by_two(client, carol):
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
    assert agents["set_aside_keys"] == ["path"]
    assert agents["in_table"] == 3 and agents["left_out"] == 0
    cells = [agents[c]["trials"] for c in ("both_pass", "outcome_only", "path_only", "both_fail")]
    assert cells == [1, 1, 1, 0]
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert 'id="agent-set-aside">Set aside: <code>path</code>' in html


def test_the_comparison_shows_the_two_by_two_movement_on_every_surface(carol, capsys):
    # base 2/1/1/0 -> head 1/2/0/1 over one shared case
    base = agent_run({"c1": [(True, True), (True, True), (True, False), (False, True)]})
    head = agent_run(
        {"c1": [(True, True), (True, False), (True, False), (False, False)]}, name="R2"
    )
    want = [(2, 1, -1), (1, 2, 1), (1, 0, -1), (0, 1, 1)]

    client = Client()
    client.force_login(carol)
    page = client.get(
        reverse("evals:comparison", kwargs={"head_id": head.uuid, "base_id": base.uuid})
    ).content.decode()
    assert 'id="agent-2x2-moves"' in page
    cells = [" ".join(row.split()) for row in page.split("<tr>") if "of 4</td>" in row]
    assert cells[0].startswith(
        '<th scope="row">outcome pass, trajectory pass</th> <td class="num">2 of 4</td> '
        '<td class="num">1 of 4</td> <td class="num">−1</td>'
    )

    csv_text = client.get(
        reverse("interop:comparison-export", kwargs={"head_id": head.uuid, "base_id": base.uuid})
        + "?format=csv"
    ).content.decode()
    rows = [r for r in csv.DictReader(io.StringIO(csv_text)) if r["section"] == "agent_2x2"]
    assert [r["case_id"] for r in rows] == ["both_pass", "outcome_only", "path_only", "both_fail"]
    assert [(int(r["base_passed"]), int(r["head_passed"])) for r in rows] == [w[:2] for w in want]

    api = client_for(carol).get(comparison_url(base, head)).json()["agents"]
    assert [(c["base"], c["head"], c["change"]) for c in api["cells"]] == want
    with pytest.raises(SystemExit):
        call_command("gate", "--base", str(base.uuid), "--head", str(head.uuid), "--json")
    assert json.loads(capsys.readouterr().out)["agents"] == api
