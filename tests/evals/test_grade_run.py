"""Grading recorded outputs: ``manage.py grade_run`` and ``POST /api/runs/<uuid>/grade``
give each development fixture its exact decision; refusals name the field."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from demo.expense_contract import CONTRACT_GRADERS, FIXTURES
from evals.grading.contract.decisions import run_decisions
from evals.grading.recorded import run_grade
from evals.models import Case, Grade, Run, Suite, Trial

# fixture -> decision of its trial
DECISION = {
    "correct": "review",
    "boundary_error": "rejected",
    "wrong_receipt": "rejected",
    "duplicate_id": "rejected",
    "stale_version": "rejected",
    "unknown_source": "rejected",
    "repeated_cases": "rejected",
    "contradictory_description": "review",
    "invented_requirement": "review",
    "reordered": "review",
    "malformed_json": "rejected",
    "string_false": "rejected",
}


def recorded_run(*, status: str = Run.Status.SUCCEEDED, with_error: bool = True) -> Run:
    """An imported-style run: one case per fixture, its output the fixture, graded by a
    harness grader that passed everything; plus one errored trial (no output)."""
    suite = Suite.objects.create(name="writer")
    run = Run.objects.create(
        suite=suite,
        name="recorded",
        source=Run.Source.IMPORTED,
        target_kind="imported",
        graders=[{"key": "harness", "kind": "imported", "gating": True}],
        status=status,
    )
    for name, text in FIXTURES.items():
        case = Case.objects.create(suite=suite, key=name, input=name)
        trial = Trial.objects.create(run=run, case=case, attempt=1, status="ok", output=text)
        Grade.objects.create(trial=trial, grader="harness", passed=True, score=1.0, reason="ok")
    if with_error:
        case = Case.objects.create(suite=suite, key="down", input="down")
        Trial.objects.create(run=run, case=case, attempt=1, status="error", error_message="503")
    return run


def graders_file(tmp_path, graders=CONTRACT_GRADERS):
    path = tmp_path / "graders.json"
    path.write_text(json.dumps(graders))
    return str(path)


@pytest.mark.django_db
def test_grade_run_gives_every_fixture_its_exact_decision(tmp_path, capsys):
    run = recorded_run()
    call_command("grade_run", str(run.uuid), "--graders", graders_file(tmp_path), "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["graders"] == ["contract"]
    assert out["trials"] == 12
    assert out["grades"] == 12
    assert out["decisions"] == {
        "rejected": 8,
        "review": 4,
        "accepted": 0,
        "errored": 0,
        "not_graded": 0,
        "infrastructure_error": 1,
    }
    run = Run.objects.get(pk=run.pk)
    decisions = run_decisions(run=run)
    by_key = {
        Trial.objects.get(id=t).case.key: d.decision
        for t, d in decisions.trials.items()
        if d.decision != "infrastructure_error"
    }
    assert by_key == DECISION
    grade = Grade.objects.get(trial__case__key="boundary_error", grader="contract")
    assert grade.passed is False
    assert grade.reason == "reject: wrong_approval at T-750; at category not covered"
    assert [g["key"] for g in run.graders] == ["harness", "contract"]
    assert decisions.valid == 10
    assert decisions.attempted == 12
    assert decisions.infrastructure_errors == 1
    assert decisions.missing_coverage == {"at": 2, "above": 1, "missing_receipt": 2}
    assert decisions.by_rule == {
        "missing_coverage": 3,
        "duplicate_id": 1,
        "invalid_json": 1,
        "schema": 1,
        "stale_version": 1,
        "unknown_source": 1,
        "wrong_approval": 1,
        "wrong_receipt": 1,
    }
    assert ("wrong_approval", "at", 1) in decisions.by_rule_scenario
    assert ("stale_version", "(whole output)", 1) in decisions.by_rule_scenario


@pytest.mark.django_db
def test_grade_run_twice_with_the_same_key_is_refused_and_writes_nothing(tmp_path):
    run = recorded_run()
    call_command("grade_run", str(run.uuid), "--graders", graders_file(tmp_path))
    with pytest.raises(CommandError, match=r"graders\[0\]\.key: the run already has"):
        call_command("grade_run", str(run.uuid), "--graders", graders_file(tmp_path))
    assert Grade.objects.filter(grader="contract").count() == 12


@pytest.mark.django_db
def test_grade_run_refuses_a_judge_and_an_unfinished_run(tmp_path):
    run = recorded_run(status=Run.Status.RUNNING)
    with pytest.raises(CommandError, match="only a finished run is graded"):
        call_command("grade_run", str(run.uuid), "--graders", graders_file(tmp_path))
    judge = [{"key": "j", "kind": "judge", "config": {"judge_version": "x"}}]
    with pytest.raises(CommandError, match=r"graders\[0\]"):
        call_command("grade_run", str(run.uuid), "--graders", graders_file(tmp_path, judge))
    assert not Grade.objects.filter(grader="contract").exists()


@pytest.mark.django_db
def test_the_api_grades_a_run_for_an_engineer_and_refuses_a_reviewer(carol, bob):
    run = recorded_run(with_error=False)
    url = f"/api/runs/{run.uuid}/grade"
    client = APIClient()
    client.force_authenticate(bob)
    assert client.post(url, {"graders": CONTRACT_GRADERS}, format="json").status_code == 403
    client.force_authenticate(carol)
    response = client.post(url, {"graders": CONTRACT_GRADERS}, format="json")
    assert response.status_code == 200
    assert response.json()["decisions"]["rejected"] == 8
    assert response.json()["decisions"]["review"] == 4
    again = client.post(url, {"graders": CONTRACT_GRADERS}, format="json")
    assert again.status_code == 409
    assert again.json()["field"] == "graders[0].key"
    bad = [{"key": "c2", "kind": "contract", "config": {"schema": {}}}]
    response = client.post(url, {"graders": bad}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "graders[0].config.items"


@pytest.mark.django_db
def test_the_report_the_csv_export_and_the_trials_api_carry_the_decisions(tmp_path, carol):
    run = recorded_run()
    call_command("grade_run", str(run.uuid), "--graders", graders_file(tmp_path))
    out = io.StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    decisions = json.loads(out.getvalue())["decisions"]
    assert decisions["counts"] == {
        "rejected": 8,
        "review": 4,
        "accepted": 0,
        "errored": 0,
        "not_graded": 0,
        "infrastructure_error": 1,
    }
    assert decisions["valid"] == 10
    assert decisions["attempted"] == 12
    assert decisions["wrong_outcome_rejects"] == 2
    assert {"reason": "reject: wrong_approval at T-750; at category not covered", "trials": 1} in (
        decisions["reasons"]
    )
    text = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=text)
    assert (
        "decisions: 8 rejected, 4 in review, 0 accepted, 0 errored, 0 not graded; "
        "1 infrastructure errors apart" in text.getvalue()
    )

    client = APIClient()
    client.force_login(carol)
    response = client.get(f"/runs/{run.uuid}/export/?format=csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {r["case_id"]: r["decision"] for r in rows} == {
        **DECISION,
        "down": "infrastructure_error",
    }
    client.force_authenticate(carol)
    response = client.get(f"/api/trials/?run={run.uuid}")
    items = response.json()["results"]
    by_key = {Trial.objects.get(uuid=t["uuid"]).case.key: t["decision"] for t in items}
    assert by_key == {**DECISION, "down": "infrastructure_error"}
    page = client.get(f"/runs/{run.uuid}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "8 rejected" in html and "4 in review" in html and "0 accepted" in html
    assert "never an acceptance" in html


@pytest.mark.django_db
def test_a_run_without_a_contract_has_no_decision_anywhere(carol):
    run = recorded_run()
    client = APIClient()
    client.force_authenticate(carol)
    items = client.get(f"/api/trials/?run={run.uuid}").json()["results"]
    assert {t["decision"] for t in items} == {None}
    out = io.StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    assert json.loads(out.getvalue())["decisions"] is None


@pytest.mark.django_db
def test_the_trial_page_shows_the_failures_and_the_coverage_table(carol):
    run = recorded_run(with_error=False)
    run_grade(run=run, graders=CONTRACT_GRADERS)
    client = APIClient()
    client.force_login(carol)
    trial = Trial.objects.get(run=run, case__key="boundary_error")
    html = client.get(f"/trials/{trial.uuid}/").content.decode()
    assert 'id="contract-contract"' in html
    assert "wrong_approval at T-750: approvalRequired is true, the oracle expects false" in html
    assert "not covered" in html
    review = Trial.objects.get(run=run, case__key="correct")
    html = client.get(f"/trials/{review.uuid}/").content.decode()
    assert "qualified for review, not accepted" in html
    assert "Open review dimensions: description_assertion_consistency" in html
