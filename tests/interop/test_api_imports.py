"""``POST /api/imports`` and the upload page with promptfoo and Inspect AI files: roles,
201 with the import summary, 400 naming the record and field, 413 over the size limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evals.models import Case, Run, Suite, Trial
from evals.report.selectors import run_report
from tests.conftest import PASSWORD, PROJECT_DIR
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db
URL = "/api/imports"
INTEROP = PROJECT_DIR / "tests" / "fixtures" / "interop"
PROMPTFOO = INTEROP / "promptfoo" / "results.json"
INSPECT = INTEROP / "inspect" / "log.json"


def _post(client, path: Path = PROMPTFOO, *, data: bytes | None = None, **fields):
    payload = {
        "file": SimpleUploadedFile(path.name, data if data is not None else path.read_bytes()),
        "format": "promptfoo",
        "suite": "S",
        "run": "R",
    }
    payload.update(fields)
    return client.post(URL, payload, format="multipart")


@pytest.mark.parametrize("who", ["alice", "carol"])
def test_an_engineer_or_a_lead_imports_and_gets_201_with_the_summary(request, who):
    response = _post(client_for(request.getfixturevalue(who)))
    assert response.status_code == 201
    body = response.json()
    assert {k: body[k] for k in ("suite", "runs", "format", "cases", "trials", "grades")} == {
        "suite": "S",
        "runs": ["R"],
        "format": "promptfoo",
        "cases": 6,
        "trials": 18,
        "grades": 54,
    }
    run = Run.objects.get(uuid=body["run_ids"][0])
    assert run.started_by.username == who


@pytest.mark.parametrize("who", ["bob", "mallory"])
def test_a_reviewer_and_an_outsider_get_403_and_nothing_is_written(request, who):
    response = _post(client_for(request.getfixturevalue(who)))
    assert response.status_code == 403
    assert Run.objects.count() == Suite.objects.count() == 0


def test_without_a_token_it_answers_401():
    assert _post(client_for(None)).status_code == 401


def test_an_inspect_log_is_detected_and_its_pass_rate_is_the_printed_accuracy(carol):
    response = _post(client_for(carol), INSPECT, format="")
    assert response.status_code == 201 and response.json()["format"] == "inspect"
    run = Run.objects.get(uuid=response.json()["run_ids"][0])
    overall = run_report(run=run).to_dict()["overall"]
    assert round(overall["pass_rate"]["mean"], 3) == 0.389  # Inspect printed 0.389


def test_a_bad_file_gets_400_naming_the_record_and_field_and_writes_nothing(carol):
    doc = json.loads(PROMPTFOO.read_bytes())
    doc["results"]["results"][9]["latencyMs"] = float("inf")
    response = _post(client_for(carol), data=json.dumps(doc).encode())
    assert response.status_code == 400
    assert response.json()["detail"].startswith(
        "results.results[9].latencyMs: expected a finite number"
    )
    assert Run.objects.count() == Trial.objects.count() == Case.objects.count() == 0
    assert Suite.objects.count() == 0


def test_a_wrong_shape_a_missing_field_and_a_repeat_get_400(carol):
    client = client_for(carol)
    response = _post(client, data=b'{"results": []}')
    assert response.status_code == 400 and response.json()["detail"].startswith("results:")
    response = client.post(
        URL, {"format": "promptfoo", "suite": "S", "run": "R"}, format="multipart"
    )
    assert response.status_code == 400 and "file" in response.json()
    response = _post(client, format="promptfooo")
    assert response.status_code == 400 and "format" in response.json()
    response = _post(client, threshold="NaN", format="csv")
    assert response.status_code == 400 and "threshold" in response.json()
    assert _post(client).status_code == 201
    response = _post(client)  # the same run name again: refused, nothing added
    assert response.status_code == 400 and "already exists" in response.json()["detail"]
    assert Trial.objects.count() == 18


def test_a_file_over_the_limit_gets_413_naming_the_limit(carol, settings):
    settings.ASSAY = {**settings.ASSAY, "IMPORT_MAX_BYTES": 1000}
    response = _post(client_for(carol), data=b"x" * 1001)
    assert response.status_code == 413
    assert response.json()["limit"] == 1000 and "1,000 bytes" in response.json()["detail"]
    big = PROMPTFOO.read_bytes()  # ~85 KB: the declared length is refused before parsing
    response = _post(client_for(carol), data=big)
    assert response.status_code == 413
    assert Run.objects.count() == 0


def test_a_body_that_is_not_multipart_gets_415(carol):
    response = client_for(carol).post(URL, {"suite": "S"}, format="json")
    assert response.status_code == 415


def test_the_schema_documents_the_endpoint(alice):
    response = client_for(alice).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    operation = response.json()["paths"]["/api/imports"]["post"]
    assert set(operation["responses"]) >= {"201", "400", "413"}


@pytest.mark.parametrize(
    ("path", "fmt"),
    [(PROMPTFOO, "promptfoo"), (INSPECT, "inspect"), (PROMPTFOO, ""), (INSPECT, "")],
)
def test_the_upload_page_imports_both_formats(client, carol, path, fmt):
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get("/imports/new/").content.decode()
    assert 'value="promptfoo"' in page and 'value="inspect"' in page
    response = client.post(
        "/imports/new/",
        {
            "file": SimpleUploadedFile(path.name, path.read_bytes()),
            "suite": "S",
            "run": "R",
            "format": fmt,
            "suite_kind": "regression",
            "mapping": "",
            "threshold": "",
        },
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.trials.count() == 18 and run.target["format"] == (fmt or run.target["format"])


def test_the_upload_page_shows_the_error_of_a_bad_inspect_log(client, carol):
    assert client.login(username=carol.username, password=PASSWORD)
    doc = json.loads(INSPECT.read_bytes())
    doc["samples"][3]["epoch"] = 0
    response = client.post(
        "/imports/new/",
        {
            "file": SimpleUploadedFile("log.json", json.dumps(doc).encode()),
            "suite": "S",
            "run": "R",
            "format": "inspect",
            "suite_kind": "regression",
            "mapping": "",
            "threshold": "",
        },
    )
    assert response.status_code == 400
    assert "samples[3].epoch: expected an integer &gt;= 1, got 0" in response.content.decode()
    assert Run.objects.count() == 0
