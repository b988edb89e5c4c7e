"""A stale source version and an unknown source id reject on every path: a run executed by
Assay (the runner grades with the contract), a recorded run imported from a file, and one
posted to the ingest API (both graded afterwards by ``grade_run``, since import and ingest
store the harness's own grades and run no grader)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from apitokens.tokens import token_create
from demo.expense_contract import CONTRACT_GRADERS, FIXTURES
from evals.grading.contract.decisions import run_decisions
from evals.models import Case, Grade, Run, Suite
from evals.runner.start import run_start
from interop.importers import results_import

STALE = 'reject: stale_version: output for "expense-v1", current "expense-v2"'
UNKNOWN = "reject: unknown_source at T-751"
EXPECTED = {"stale_version": STALE, "unknown_source": UNKNOWN, "correct": None}


def contract_reasons(run: Run) -> dict[str, str]:
    return dict(
        Grade.objects.filter(trial__run=run, grader="contract").values_list(
            "trial__case__key", "reason"
        )
    )


def assert_rejected(run: Run) -> None:
    run = Run.objects.get(pk=run.pk)
    reasons = contract_reasons(run)
    assert reasons["stale_version"] == STALE
    assert reasons["unknown_source"] == UNKNOWN
    assert reasons["correct"].startswith("review: ")
    decisions = run_decisions(run=run)
    assert decisions.counts["rejected"] == 2
    assert decisions.counts["review"] == 1


def records() -> list[dict]:
    return [
        {"case_id": name, "input": name, "output": FIXTURES[name], "passed": True}
        for name in EXPECTED
    ]


@pytest.mark.django_db
def test_on_a_run_the_runner_rejects_them(carol, django_capture_on_commit_callbacks):
    suite = Suite.objects.create(name="writer")
    for name in EXPECTED:
        Case.objects.create(suite=suite, key=name, input=name)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(
            suite=suite,
            name="r1",
            target={"kind": "callable", "path": "tests.grader_oracles:contract_fixture"},
            graders=CONTRACT_GRADERS,
            trials_per_case=1,
            started_by=carol,
        )
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert_rejected(run)


@pytest.mark.django_db
def test_on_an_imported_run_grade_run_rejects_them(tmp_path):
    text = "\n".join(json.dumps(r) for r in records()) + "\n"
    results_import(
        stream=io.BytesIO(text.encode()), filename="r.jsonl", suite_name="writer", run_name="imp"
    )
    run = Run.objects.get(name="imp")
    path = tmp_path / "g.json"
    path.write_text(json.dumps(CONTRACT_GRADERS))
    call_command("grade_run", str(run.uuid), "--graders", str(path))
    assert_rejected(run)


@pytest.mark.django_db
def test_on_an_ingested_run_grade_run_rejects_them(carol):
    client = APIClient()
    _, token = token_create(user=carol, name="ci")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {"suite": "writer", "run": "ing", "trials": records()}
    response = client.post("/api/ingest", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(name="ing")
    response = client.post(
        f"/api/runs/{run.uuid}/grade", {"graders": CONTRACT_GRADERS}, format="json"
    )
    assert response.status_code == 200, response.content
    assert_rejected(run)
