"""An imported run shows its honest status on every surface: "imported" with its errored
trials and whether it is partial (evals.run_status), never "succeeded" (run list, run page,
suite page, grid, case history, the API, run_report)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from evals.models import Case, Run
from evals.run_status import run_status_shown
from interop.run_file import run_export, run_import
from tests.conftest import PROJECT_DIR
from tests.import_helpers import import_bytes

pytestmark = pytest.mark.django_db
INSPECT = PROJECT_DIR / "tests" / "fixtures" / "interop" / "inspect"


def _inspect(doc: dict, *, suite: str = "ins", run: str = "r1") -> Run:
    return import_bytes(
        json.dumps(doc).encode(), filename="log.json", suite=suite, run=run, fmt="inspect"
    ).runs[0]


def _doc(path: Path) -> dict:
    return json.loads(path.read_bytes())


def test_an_inspect_log_with_sample_errors_is_imported_with_its_errored_count_not_succeeded():
    run = _inspect(_doc(INSPECT / "log-errors.json"))  # 2 of 6 samples errored
    shown = run_status_shown(run)
    assert (shown.key, shown.label, shown.errored, shown.partial) == (
        "imported-problems",
        "imported",
        2,
        False,
    )
    assert shown.problems == ("2 of 6 trials errored",)
    assert run.error_message == "2 of 6 trials errored"


def test_a_clean_inspect_log_shows_imported_with_no_problem():
    run = _inspect(_doc(INSPECT / "log.json"))
    shown = run_status_shown(run)
    assert (shown.key, shown.label, shown.problems) == ("imported", "imported", ())
    assert (run.trials_finished, run.trials_total, run.error_message) == (18, 18, "")


def test_a_cancelled_inspect_log_is_partial_against_the_samples_it_planned():
    doc = _doc(INSPECT / "log.json")  # 6 samples x 3 epochs planned
    doc["status"] = "cancelled"
    doc["samples"] = [s for s in doc["samples"] if s["epoch"] == 1]  # stopped after epoch 1
    run = _inspect(doc)
    shown = run_status_shown(run)
    assert shown.partial and shown.key == "imported-problems"
    assert shown.problems == ("partial: 6 of 18 trials recorded",)
    assert run.error_message == (
        "partial: 6 of 18 trials recorded; the source's status is 'cancelled'"
    )


def test_an_uneven_grid_of_attempts_is_not_partial():
    """The planned total of an import is what its source recorded: cases with different
    attempt counts are not partial (never cases x the largest attempt)."""
    rows = (
        '{"case_id": "c1", "input": "q1", "attempt": 1, "passed": true}\n'
        '{"case_id": "c1", "input": "q1", "attempt": 2, "passed": true}\n'
        '{"case_id": "c2", "input": "q2", "attempt": 1, "passed": true}\n'
    )
    run = import_bytes(rows.encode(), filename="r.jsonl", fmt="jsonl").runs[0]
    shown = run_status_shown(run)
    assert (run.trials_finished, run.trials_total, run.trials_per_case) == (3, 3, 2)
    assert not shown.partial and shown.problems == ()
    assert (shown.key, shown.text, run.error_message) == ("imported", "imported", "")


def test_a_run_file_of_a_failed_run_keeps_failed_and_shows_imported_with_its_errors():
    run = _inspect(_doc(INSPECT / "log-errors.json"))
    data = run_export(run=run)
    data["run"]["status"] = "failed"
    again = run_import(data=data, suite_name="copy", name="again")
    shown = run_status_shown(again)
    assert again.status == "failed" and shown.label == "imported"
    assert shown.problems == ("2 of 6 trials errored", "failed at the source")


def test_an_executed_run_shows_its_stored_status():
    run = _inspect(_doc(INSPECT / "log.json"))
    Run.objects.filter(id=run.id).update(source=Run.Source.EXECUTED)
    run.refresh_from_db()
    assert (run_status_shown(run).key, run_status_shown(run).label) == ("succeeded", "succeeded")


def _badge(page: str) -> bool:
    return (
        'class="badge status-imported-problems run-status" data-status="imported-problems">'
        "imported</span>"
        in page
        and '<span class="badge status-error run-problem">2 of 6 trials errored</span>' in page
    )


def test_every_page_shows_the_imported_status_and_its_errors(client, carol):
    run = _inspect(_doc(INSPECT / "log-errors.json"))
    client.force_login(carol)
    case = Case.objects.filter(suite=run.suite).order_by("key").first()
    urls = [
        reverse("evals:run-list"),
        reverse("evals:run-detail", args=[run.uuid]),
        reverse("evals:run-progress", args=[run.uuid]),
        reverse("evals:suite-detail", args=[run.suite.uuid]),
        reverse("evals:suite-grid", args=[run.suite.uuid]),
        reverse("evals:case-history", args=[run.suite.uuid, case.uuid]),
    ]
    for url in urls:
        page = client.get(url).content.decode()
        assert _badge(page), url
        assert "status-succeeded" not in page, url


def test_the_api_and_run_report_say_the_same(client, carol):
    run = _inspect(_doc(INSPECT / "log-errors.json"))
    client.force_login(carol)
    want = {
        "key": "imported-problems",
        "label": "imported",
        "problems": ["2 of 6 trials errored"],
        "errored": 2,
        "partial": False,
    }
    listed = client.get("/api/runs/").json()["results"][0]
    assert listed["status_shown"] == want
    detail = client.get(f"/api/runs/{run.uuid}/").json()
    assert detail["status_shown"] == want and detail["report"]["status_shown"] == want
    grid = client.get(f"/api/suites/{run.suite.uuid}/grid").json()
    assert grid["columns"][0]["status_shown"] == want
    case = Case.objects.filter(suite=run.suite).order_by("key").first()
    history = client.get(f"/api/suites/{run.suite.uuid}/cases/{case.uuid}/history").json()
    assert history["runs"][0]["status_shown"] == want
    out = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=out)
    assert out.getvalue().splitlines()[0] == "ins / r1 (imported · 2 of 6 trials errored)"
    out = io.StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    assert json.loads(out.getvalue())["status_shown"] == want
