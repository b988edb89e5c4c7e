"""Agents across every importer: nothing set aside. A limit Inspect hit is an errored trial
of the tool loop's kind, counted on the run page; JSONL and CSV results keep trajectory,
final state and goal state as ingest does; an agent's empty Inspect store is a state."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from core.errors import DomainError
from evals.models import Trial
from evals.report.selectors import run_report
from interop.importers import results_import
from tests.interop.test_agent_trajectories_interop import GOAL, STEPS, agent_trial
from tests.interop.test_import_inspect import _bytes, _import
from tests.interop.test_import_inspect_agent import AGENT_LOG
from tests.interop.test_import_promptfoo import _bytes as pf_bytes
from tests.interop.test_import_promptfoo import _doc as pf_doc
from tests.interop.test_import_promptfoo import _import as pf_import

pytestmark = pytest.mark.django_db


def _agent_doc() -> dict:
    return json.loads(AGENT_LOG.read_bytes())


def test_an_inspect_sample_stopped_at_its_message_limit_is_an_errored_step_cap_trial(client, carol):
    doc = _agent_doc()
    doc["samples"][0]["limit"] = {"type": "message", "limit": 10}
    run = _import(_bytes(doc), name="agent-log.json").runs[0]
    stopped = Trial.objects.get(run=run, case__key=doc["samples"][0]["id"], attempt=1)
    assert stopped.status == Trial.Status.ERROR
    assert stopped.error_message == "step_cap: Inspect stopped the sample at its message_limit (10)"
    assert not stopped.grades.exists()
    assert stopped.trajectory and stopped.final_state  # kept, as the tool loop keeps them
    report = run_report(run=run).to_dict()
    assert report["limit_hits"] == [{"kind": "step_cap", "count": 1}]
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert "Stopped at a limit (errored, never graded): <strong>1</strong> step_cap" in html


def test_an_agent_samples_empty_store_is_an_empty_final_state():
    doc = _agent_doc()
    doc["samples"][0]["store"] = {}
    run = _import(_bytes(doc), name="agent-log.json").runs[0]
    trial = Trial.objects.get(run=run, case__key=doc["samples"][0]["id"], attempt=1)
    assert trial.final_state == {}


def _results(data: bytes, fmt: str, name: str):
    return results_import(
        stream=io.BytesIO(data), filename=name, suite_name="agents", run_name="r1", fmt=fmt
    ).runs[0]


def test_a_jsonl_results_file_keeps_trajectory_final_state_and_goal_state():
    records = [agent_trial(1), agent_trial(2, final_state={})]
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    run = _results(data, "jsonl", "r.jsonl")
    trials = {t.case.key: t for t in Trial.objects.filter(run=run).select_related("case")}
    assert trials["c1"].trajectory[1]["arguments"] == {"order_id": "A1"}
    assert trials["c1"].final_state == {"orders": {"A1": {"refunded": 30}}}
    assert trials["c1"].case.goal_state == GOAL
    assert trials["c2"].final_state == {}
    assert "trajectory" not in (trials["c1"].raw_response or {}).get("extra", {})


def test_a_csv_results_file_reads_agent_columns_as_json_text():
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["case_id", "input", "output", "goal_state", "final_state", "trajectory"])
    writer.writerow(["c1", "refund A1", "ok", json.dumps(GOAL), "{}", json.dumps(STEPS)])
    run = _results(out.getvalue().encode(), "csv", "r.csv")
    trial = Trial.objects.select_related("case").get(run=run)
    assert len(trial.trajectory) == len(STEPS)
    assert trial.final_state == {}
    assert trial.case.goal_state == GOAL


def test_a_bad_step_in_a_jsonl_file_is_refused_naming_the_line_and_the_step():
    bad = agent_trial(1, trajectory=[{"kind": "tool_call", "name": "x", "arguments": [1]}])
    with pytest.raises(DomainError) as caught:
        _results((json.dumps(bad) + "\n").encode(), "jsonl", "r.jsonl")
    assert caught.value.field == "trajectory[0].arguments"
    assert "line 1" in caught.value.detail


def test_a_promptfoo_agent_row_keeps_its_steps_final_state_and_goal_state():
    doc = pf_doc()
    rows = doc["results"]["results"]
    first = rows[0]
    for row in rows:
        if row["testCase"].get("description") == first["testCase"].get("description"):
            row["testCase"].setdefault("metadata", {})["goal_state"] = GOAL
            row["response"].setdefault("metadata", {}).update(trajectory=STEPS, final_state={})
    run = pf_import(pf_bytes(doc)).runs[0]
    trial = Trial.objects.select_related("case").filter(run=run, trajectory__isnull=False).first()
    assert trial is not None and len(trial.trajectory) == len(STEPS)
    assert trial.final_state == {}
    assert trial.case.goal_state == GOAL


def test_a_mapping_that_does_not_name_the_agent_fields_still_keeps_them():
    record = {"id": "c1", "input": "refund A1", "trajectory": STEPS, "final_state": {}}
    run = results_import(
        stream=io.BytesIO((json.dumps(record) + "\n").encode()),
        filename="r.jsonl",
        suite_name="agents",
        run_name="r1",
        fmt="jsonl",
        mapping={"case_id": "id", "input": "input"},
    ).runs[0]
    trial = Trial.objects.get(run=run)
    assert len(trial.trajectory) == len(STEPS) and trial.final_state == {}
