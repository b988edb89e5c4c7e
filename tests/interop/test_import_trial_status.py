"""A trial's status and error on every import path: a failure of the pipeline is an errored
trial, never an ok trial graded as a pass, and never a skip (``trial_row.trial_status``)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from apitokens.tokens import token_create
from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from tests.conftest import PASSWORD
from tests.import_helpers import import_bytes, upload_post

pytestmark = pytest.mark.django_db

JSONL_ROWS = (
    '{"case_id": "c1", "input": "q1", "output": "a1", "passed": true}\n'
    '{"case_id": "c2", "input": "q2", "output": "", "status": "error", '
    '"error": "HTTP 500 from the model"}\n'
)
CSV_ROWS = (
    b"case_id,input,output,status,error,passed\n"
    b"c1,q1,a1,ok,,true\n"
    b"c2,q2,,error,HTTP 500 from the model,\n"
)


def _jsonl(text: str, **kwargs):
    return import_bytes(text.encode(), filename="results.jsonl", fmt="jsonl", **kwargs)


def _csv(data: bytes, **kwargs):
    return import_bytes(data, filename="results.csv", fmt="csv", **kwargs)


def _refused(call) -> DomainError:
    with pytest.raises(DomainError) as caught:
        call()
    assert Run.objects.count() == Trial.objects.count() == Case.objects.count() == 0
    return caught.value


def _stored() -> list[tuple]:
    return list(
        Trial.objects.order_by("case__key").values_list(
            "case__key", "status", "error_message", "output"
        )
    )


def _assert_one_errored_one_passed(summary) -> None:
    assert _stored() == [
        ("c1", "ok", "", "a1"),
        ("c2", "error", "HTTP 500 from the model", ""),
    ]
    errored = Trial.objects.get(case__key="c2")
    assert not Grade.objects.filter(trial=errored).exists()  # never graded
    assert "status" not in errored.raw_response["extra"]
    assert "error" not in errored.raw_response["extra"]
    assert list(Grade.objects.values_list("trial__case__key", "passed")) == [("c1", True)]
    run = summary.runs[0]
    run.refresh_from_db()
    assert (run.trials_finished, run.trials_errored, run.error_message) == (
        2,
        1,
        "1 of 2 trials errored",
    )
    assert (summary.trials, summary.grades) == (2, 1)


def test_a_jsonl_row_with_status_error_is_an_errored_trial_never_graded():
    _assert_one_errored_one_passed(_jsonl(JSONL_ROWS))


def test_a_csv_row_with_status_error_is_an_errored_trial_by_its_column_names():
    _assert_one_errored_one_passed(_csv(CSV_ROWS))


def test_a_mapping_may_name_the_status_and_error_columns():
    data = CSV_ROWS.replace(b"status,error,", b"state,why,")
    mapping = {
        "case_id": "case_id",
        "input": "input",
        "output": "output",
        "status": "state",
        "error": "why",
        "passed": "passed",
    }
    _assert_one_errored_one_passed(_csv(data, mapping=mapping))


@pytest.mark.parametrize(
    ("status", "shown"),
    [("failed", "'failed'"), ("Error", "'Error'"), ("ERROR", "'ERROR'"), ("true", "'true'")],
)
def test_any_other_status_is_refused_naming_the_row_and_field(status, shown):
    data = CSV_ROWS.replace(b"c2,q2,,error,", f"c2,q2,,{status},".encode())
    error = _refused(lambda: _csv(data))
    assert (error.field, str(error)) == (
        "status",
        f"row 2 (line 3): field status: expected one of ok, error, cancelled, got {shown}",
    )


def test_a_status_that_is_not_a_string_is_refused():
    error = _refused(lambda: _jsonl('{"case_id": "c1", "input": "q", "status": 0}\n'))
    assert str(error) == "line 1: field status: expected one of ok, error, cancelled, got 0"


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_trial_that_has_not_finished_is_refused(status):
    error = _refused(lambda: _jsonl(f'{{"case_id": "c1", "input": "q", "status": "{status}"}}\n'))
    assert str(error) == (
        f"line 1: field status: a {status} trial has not finished: import finished trials "
        "(ok, error) or cancelled ones"
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"passed": True},
            "passed",
            "a trial with status 'error' carries no verdict (got True): it is never graded; "
            "empty this field",
        ),
        (
            {"passed": False},
            "passed",
            "a trial with status 'error' carries no verdict (got False): it is never graded; "
            "empty this field",
        ),
        (
            {"score": 1.0},
            "score",
            "a trial with status 'error' carries no verdict (got 1.0): it is never graded; "
            "empty this field",
        ),
        (
            {"scores": {"judge": 0.9}},
            "scores",
            "a trial with status 'error' carries no verdict (got {'judge': 0.9}): it is never "
            "graded; empty this field",
        ),
        (
            {"judge_status": "ok"},
            "judge_status",
            "a trial with status 'error' carries no verdict (got 'ok'): it is never graded; "
            "empty this field",
        ),
        ({"error": None}, "error", 'required with status "error": what went wrong'),
        ({"error": "  "}, "error", 'required with status "error": what went wrong'),
        ({"error": 500}, "error", "expected a string, got 500"),
        ({"error": "x" * 100_001}, "error", "longer than 100,000 characters"),
        (
            {"status": "ok"},
            "error",
            'an error message needs status "error" (this row is ok)',
        ),
        (
            {"status": None},
            "error",
            'an error message needs status "error" (this row is ok)',
        ),
    ],
)
def test_an_errored_row_that_contradicts_itself_is_refused(changes, field, message):
    row = {"case_id": "c1", "input": "q", "status": "error", "error": "timeout", **changes}
    error = _refused(lambda: _jsonl(json.dumps(row) + "\n"))
    assert (error.field, error.record, error.message) == (field, None, message)
    assert str(error) == f"line 1: field {field}: {message}"


def test_a_csv_row_with_status_error_and_passed_true_is_refused_naming_the_row():
    data = CSV_ROWS.replace(b"HTTP 500 from the model,\n", b"HTTP 500 from the model,true\n")
    error = _refused(lambda: _csv(data))
    assert str(error).startswith("row 2 (line 3): field passed: a trial with status 'error'")


def test_a_cancelled_trial_is_stored_cancelled_and_the_run_says_it_apart_never_partial():
    summary = _jsonl(
        '{"case_id": "c1", "input": "q1", "output": "a", "passed": true}\n'
        '{"case_id": "c2", "input": "q2", "status": "cancelled"}\n'
    )
    assert _stored() == [("c1", "ok", "", "a"), ("c2", "cancelled", "", "")]
    assert not Grade.objects.filter(trial__status="cancelled").exists()
    run = summary.runs[0]
    run.refresh_from_db()
    assert (
        run.trials_total,
        run.trials_finished,
        run.trials_errored,
        run.trials_cancelled,
        run.error_message,
    ) == (2, 1, 0, 1, "1 cancelled")
    assert summary.trials == 2


@pytest.mark.parametrize("column", ["status", "error"])
def test_a_mapping_that_leaves_a_status_or_error_column_unmapped_is_refused(column):
    mapping = {"case_id": "case_id", "input": "input", "output": "output", "passed": "passed"}
    other = "error" if column == "status" else "status"
    mapping[other] = other
    error = _refused(lambda: _csv(CSV_ROWS, mapping=mapping))
    means = {
        "status": "the trial's status: ok, error or cancelled",
        "error": "what went wrong in an errored trial",
    }[column]
    assert (error.field, str(error)) == (
        "mapping",
        f"mapping: the column {column!r} is not mapped: map it ({column}={column}: {means}), "
        f"or rename or remove the column; an unmapped {column} would let a failed row pass "
        "for an ok trial",
    )


def test_a_jsonl_mapping_that_leaves_a_status_key_unmapped_is_refused_naming_the_line():
    mapping = {"case_id": "case_id", "input": "input", "output": "output", "passed": "passed"}
    error = _refused(lambda: _jsonl(JSONL_ROWS, mapping=mapping))
    assert str(error).startswith("line 2: mapping: the column 'status' is not mapped: map it")
    assert error.field == "mapping"


def test_a_status_column_read_by_another_field_is_not_refused():
    data = b"case_id,input,status\nc1,q,timeout\n"
    _csv(data, mapping={"case_id": "case_id", "input": "input", "judge_status": "status"})
    grade = Grade.objects.get()
    assert (grade.status, grade.reason, grade.trial.status) == ("error", "timeout", "ok")


# The surfaces: command, web form, API ----------------------------------------------------


def test_the_command_counts_and_stores_the_errored_trial(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(JSONL_ROWS)
    out = StringIO()
    call_command("import_results", str(path), "--suite", "S", "--run", "R", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert (data["trials"], data["grades"]) == (2, 1)
    assert Run.objects.get().trials_errored == 1
    assert Trial.objects.get(case__key="c2").status == "error"


def test_the_upload_page_stores_the_errored_trial_and_shows_a_refusal(client, carol):
    assert client.login(username=carol.username, password=PASSWORD)
    bad = CSV_ROWS.replace(b"c2,q2,,error,", b"c2,q2,,failed,")
    response = upload_post(client, bad, "r.csv")
    assert response.status_code == 400
    assert (
        "Nothing was imported. row 2 (line 3): field status: expected one of ok, error, "
        "cancelled, got &#x27;failed&#x27;" in response.content.decode()
    )
    assert Trial.objects.count() == 0
    response = upload_post(client, CSV_ROWS, "r.csv")
    assert response.status_code == 302
    assert _stored()[1] == ("c2", "error", "HTTP 500 from the model", "")


def test_the_upload_page_says_what_the_status_and_error_fields_are(client, carol):
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get("/imports/new/").content.decode()
    assert "A failed row is status=error with its error message: an errored trial" in page
    assert "case_id, input, expected, output, status, error, attempt" in page


def _api(user) -> APIClient:
    api = APIClient()
    _, token = token_create(user=user, name="ci")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return api


def test_the_import_api_stores_the_errored_trial_and_names_a_contradiction(carol):
    bad = CSV_ROWS.replace(b"HTTP 500 from the model,\n", b"HTTP 500 from the model,true\n")
    fields = {"format": "csv", "suite": "S", "run": "R"}
    response = _api(carol).post(
        "/api/imports", {**fields, "file": SimpleUploadedFile("r.csv", bad)}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "passed"
    assert Trial.objects.count() == 0
    response = _api(carol).post(
        "/api/imports",
        {**fields, "file": SimpleUploadedFile("r.csv", CSV_ROWS)},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert _stored()[1] == ("c2", "error", "HTTP 500 from the model", "")


# The bulk ingest API: the same rule, ``error_message`` its older name -------------------


def _ingest(user, trials: list[dict]):
    body = {"suite": "ingest", "run": "r1", "trials": trials}
    return _api(user).post("/api/ingest", json.dumps(body), content_type="application/json")


def test_the_ingest_api_takes_error_or_error_message(carol):
    response = _ingest(
        carol,
        [
            {"case_id": "c1", "input": "q", "status": "error", "error": "boom"},
            {"case_id": "c2", "input": "q", "status": "error", "error_message": "bang"},
            {"case_id": "c3", "input": "q", "status": "cancelled"},
            {"case_id": "c4", "input": "q", "output": "a", "passed": True},
        ],
    )
    assert response.status_code == 201, response.content
    assert _stored() == [
        ("c1", "error", "boom", ""),
        ("c2", "error", "bang", ""),
        ("c3", "cancelled", "", ""),
        ("c4", "ok", "", "a"),
    ]
    assert list(Grade.objects.values_list("trial__case__key", flat=True)) == ["c4"]
    run = Run.objects.get()
    assert (run.trials_finished, run.trials_errored) == (3, 2)


@pytest.mark.parametrize(
    ("record", "field", "detail"),
    [
        (
            {"status": "failed", "error_message": "x"},
            "status",
            "field status: expected one of ok, error, cancelled, got 'failed'",
        ),
        (
            {"status": "error", "error_message": "x", "passed": True},
            "passed",
            "field passed: a trial with status 'error' carries no verdict (got True)",
        ),
        (
            {"status": "error", "error": "x", "error_message": "x"},
            "error_message",
            "field error_message: give the error message once: error or error_message, not both",
        ),
        (
            {"status": "error"},
            "error",
            'field error: required with status "error": what went wrong',
        ),
        (
            {"status": "error", "error_message": ""},
            "error_message",
            'field error_message: required with status "error": what went wrong',
        ),
        (
            {"status": "error", "error": " "},
            "error",
            'field error: required with status "error": what went wrong',
        ),
        (
            {"error_message": "x"},
            "error_message",
            'field error_message: an error message needs status "error" (this row is ok)',
        ),
        (
            {"error": "x"},
            "error",
            'field error: an error message needs status "error" (this row is ok)',
        ),
    ],
)
def test_the_ingest_api_refuses_a_bad_status_naming_record_and_field(carol, record, field, detail):
    response = _ingest(
        carol, [{"case_id": "c0", "input": "q"}, {"case_id": "c1", "input": "q", **record}]
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["field"], body["record"]) == (field, 1)
    assert detail in body["detail"]
    assert Run.objects.count() == Trial.objects.count() == Suite.objects.count() == 0


@pytest.mark.parametrize(
    ("record", "field"),
    [({"status": "error"}, "error"), ({"status": "error", "error_message": None}, "error_message")],
)
def test_an_ndjson_errored_record_without_a_message_names_the_field_it_used(carol, record, field):
    lines = [{"suite": "ingest", "run": "r1"}, {"case_id": "c1", "input": "q", **record}]
    body = "\n".join(json.dumps(line) for line in lines) + "\n"
    response = _api(carol).post("/api/ingest", body.encode(), content_type="application/x-ndjson")
    assert response.status_code == 400, response.content
    assert response.json() == {
        "detail": f'line 2: field {field}: required with status "error": what went wrong',
        "record": 2,
        "field": field,
    }
    assert Run.objects.count() == Trial.objects.count() == Suite.objects.count() == 0
