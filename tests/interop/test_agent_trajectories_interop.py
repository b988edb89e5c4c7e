"""Agent trajectories across the border: bulk ingest (trajectory, final_state, goal_state,
status), the run file and the run CSV export read back, and the API's trial detail."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command

from evals.models import Case, Grade, Run, Trial
from interop import exports
from interop.run_file import run_export, run_import
from tests.core.test_api_core import client_for as session_client_for
from tests.import_helpers import import_bytes
from tests.interop.test_api_ingest import (
    NDJSON,
    NOTHING,
    client_for,
    header,
    ndjson,
    post_json,
    row_counts,
)

pytestmark = pytest.mark.django_db

STEPS = [
    {"kind": "message", "content": "Checking the order.", "input_tokens": 40, "cost_usd": 0.0001},
    {"kind": "tool_call", "name": "lookup_order", "arguments": {"order_id": "A1"}, "id": "c1"},
    {"kind": "tool_result", "id": "c1", "content": {"total": 30}, "latency_ms": 3.5},
    {"kind": "tool_call", "name": "issue_refund", "arguments": {"amount": 30}, "id": "c2"},
    {"kind": "tool_result", "id": "c2", "content": "<script>alert(1)</script>"},
]
GOAL = {"orders": {"A1": {"refunded": 30}}}


def agent_trial(i: int, **changes) -> dict:
    return {
        "case_id": f"c{i}",
        "input": f"refund order A{i}",
        "goal_state": GOAL,
        "output": "Refunded.",
        "passed": True,
        "trajectory": STEPS,
        "final_state": {"orders": {"A1": {"refunded": 30}}},
        **changes,
    }


def test_ingest_stores_trajectories_final_states_goal_states_and_errored_trials(alice):
    trials = [
        agent_trial(1),
        agent_trial(1, attempt=2, passed=None, status="error", error_message="step cap: 20"),
        agent_trial(2, trajectory=None, final_state=None, goal_state=None),
    ]
    trials[1].pop("passed")
    resp = post_json(client_for(alice), header(trials=trials))
    assert resp.status_code == 201, resp.content
    run = Run.objects.get(uuid=resp.json()["run"])
    first = Trial.objects.get(run=run, case__key="c1", attempt=1)
    assert [s["kind"] for s in first.trajectory] == [s["kind"] for s in STEPS]
    assert first.trajectory[0]["role"] == "assistant"  # defaults filled in by the parser
    assert first.trajectory[4]["status"] == "ok"
    assert first.final_state == {"orders": {"A1": {"refunded": 30}}}
    assert first.case.goal_state == GOAL
    errored = Trial.objects.get(run=run, case__key="c1", attempt=2)
    assert (errored.status, errored.error_message) == ("error", "step cap: 20")
    assert not Grade.objects.filter(trial=errored).exists()  # never graded, never a pass
    assert errored.trajectory is not None
    plain = Trial.objects.get(run=run, case__key="c2")
    assert (plain.trajectory, plain.final_state, plain.case.goal_state) == (None, None, None)
    # c1 twice, c2 once: the 3 recorded are the plan; cases with different attempt counts
    # are not partial (evals.run_status).
    assert (run.trials_finished, run.trials_total, run.trials_errored) == (3, 3, 1)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"trajectory": [STEPS[0], {"kind": "tool_call", "name": "x", "arguments": "a=1"}]},
            "trajectory[1].arguments",
        ),
        ({"trajectory": [{"kind": "tool_result", "content": "a\u0000b"}]}, "trajectory[0].content"),
        ({"trajectory": {"kind": "message"}}, "trajectory"),
        ({"final_state": {"x": [1, "\ud800"]}}, "final_state.x[1]"),
        ({"goal_state": {"x": "\u0000"}}, "goal_state.x"),
        ({"status": "error", "error_message": "boom"}, "passed"),
        ({"status": "failed", "passed": None}, "status"),
        ({"status": "error", "passed": None}, "error"),
        ({"error_message": "why?"}, "error_message"),
    ],
)
def test_a_bad_agent_record_is_refused_naming_record_and_field_and_nothing_is_written(
    alice, change, field
):
    trials = [agent_trial(1), agent_trial(2, **change)]
    if trials[1].get("passed", 0) is None:
        trials[1].pop("passed")
    resp = post_json(client_for(alice), header(trials=trials))
    assert resp.status_code == 400, resp.content
    body = resp.json()
    assert (body["field"], body["record"]) == (field, 1)  # JSON records count from 0
    assert row_counts() == NOTHING


def test_a_goal_state_without_the_case_input_is_refused(alice):
    trials = [agent_trial(1), {"case_id": "c1", "attempt": 2, "goal_state": GOAL, "output": "x"}]
    resp = post_json(client_for(alice), header(trials=trials))
    assert resp.status_code == 400
    assert (resp.json()["field"], resp.json()["record"]) == ("goal_state", 1)
    assert row_counts() == NOTHING


def test_ndjson_ingest_with_a_bad_step_names_the_line(alice):
    text = ndjson(
        header(),
        [agent_trial(1), agent_trial(2, trajectory=[{"kind": "thought"}])],
    )
    resp = client_for(alice).post("/api/ingest", data=text.encode(), content_type=NDJSON)
    assert resp.status_code == 400
    assert (resp.json()["field"], resp.json()["record"]) == ("trajectory[0].kind", 3)
    assert row_counts() == NOTHING


def _agent_run(alice) -> Run:
    resp = post_json(
        client_for(alice),
        header(trials=[agent_trial(1), agent_trial(2, final_state=-1, goal_state="=cmd")]),
    )
    assert resp.status_code == 201, resp.content
    return Run.objects.get(uuid=resp.json()["run"])


def test_the_run_file_carries_trajectories_and_checks_the_goal_state_in_the_content_hash(
    alice, tmp_path
):
    run = _agent_run(alice)
    data = run_export(run=run)
    case = data["cases"][0]
    assert case["goal_state"] == GOAL
    assert case["trials"][0]["trajectory"][3]["name"] == "issue_refund"
    copy = run_import(data=json.loads(json.dumps(data)), suite_name="copy")
    again = Trial.objects.get(run=copy, case__key="c1")
    assert again.trajectory == Trial.objects.get(run=run, case__key="c1").trajectory
    assert again.case.goal_state == GOAL
    assert again.case.content_hash == Case.objects.get(suite=run.suite, key="c1").content_hash

    slim = run_export(run=run, outputs=False)
    assert "trajectory" not in slim["cases"][0]["trials"][0]
    assert slim["cases"][0]["goal_state"] == GOAL  # content, always

    tampered = json.loads(json.dumps(data))
    tampered["cases"][0]["goal_state"] = {"orders": {}}
    with pytest.raises(Exception) as caught:
        run_import(data=tampered, suite_name="tampered")
    assert caught.value.field == "cases[0].content_hash"
    bad = json.loads(json.dumps(data))
    bad["cases"][0]["trials"][0]["trajectory"][1]["arguments"] = []
    with pytest.raises(Exception) as caught:
        run_import(data=bad, suite_name="bad")
    assert caught.value.field == "cases[0].trials[0].trajectory[1].arguments"
    assert not Run.objects.filter(suite__name__in=["tampered", "bad"]).exists()

    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    assert json.loads(path.read_text())["cases"][0]["trials"][0]["final_state"]


def test_the_run_csv_export_carries_agent_columns_and_reads_back_intact(alice):
    run = _agent_run(alice)
    table = exports.run_table(run=run)
    names = [name for name, _ in table.columns]
    at = names.index("created_at")
    assert names[at + 1 : at + 4] == ["goal_state", "final_state", "trajectory"]
    body = exports.table_csv(table)
    cells = {r["case_id"]: r for r in csv.DictReader(io.StringIO(body.decode()))}
    assert cells["c2"]["final_state"] == "'-1"  # a formula-like cell is neutralised ...
    assert cells["c2"]["goal_state"] == '"=cmd"'  # ... JSON text of a string never starts so
    import_bytes(body, filename="export.csv", suite="copy", run="again")
    again = Run.objects.get(name="again")
    for key in ("c1", "c2"):
        old = Trial.objects.get(run=run, case__key=key)
        new = Trial.objects.get(run=again, case__key=key)
        assert (new.trajectory, new.final_state) == (old.trajectory, old.final_state)
        assert new.case.goal_state == old.case.goal_state
        assert new.case.content_hash == old.case.content_hash
    exports.table_parquet(table)  # the JSON text columns write as strings


def test_the_api_trial_detail_serves_trajectory_final_state_and_goal_state(alice):
    run = _agent_run(alice)
    trial = Trial.objects.get(run=run, case__key="c1")
    client = session_client_for(alice)
    detail = client.get(f"/api/trials/{trial.uuid}/").json()
    assert detail["trajectory"][1]["arguments"] == {"order_id": "A1"}
    assert detail["final_state"] == {"orders": {"A1": {"refunded": 30}}}
    assert detail["goal_state"] == GOAL
    listed = client.get(f"/api/trials/?run={run.uuid}").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows and "trajectory" not in rows[0]
