"""A column (JSONL: key) naming a trial's ``status`` or ``error`` in any case and with any
surrounding spaces is never kept as extra text (which would let a failed row pass for an ok
trial): left unmapped, with or without a mapping, it is refused on every import path
(``tabular.unmapped_status_column``); mapped, it is read."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from core.errors import DomainError
from evals.models import Case, Run, Trial
from tests.conftest import PASSWORD
from tests.import_helpers import import_bytes
from tests.interop.test_api_ingest import NOTHING, client_for, header, post_json, row_counts
from tests.interop.test_import_trial_status import _api

pytestmark = pytest.mark.django_db

MEANS = {
    "status": "the trial's status: ok, error or cancelled",
    "error": "what went wrong in an errored trial",
}
BASE = {"case_id": "case_id", "input": "input", "output": "output", "passed": "passed"}


def _says(column: str, field: str) -> str:
    return (
        f"the column {column!r} is not mapped: map it ({field}={column}: {MEANS[field]}), or "
        f"rename or remove the column; an unmapped {field} would let a failed row pass for an "
        "ok trial"
    )


def _refused(call) -> DomainError:
    with pytest.raises(DomainError) as caught:
        call()
    assert Run.objects.count() == Trial.objects.count() == Case.objects.count() == 0
    return caught.value


def _csv(column: str) -> bytes:
    return f"case_id,input,output,{column},passed\nc1,q,a,,true\nc2,q,,boom,\n".encode()


@pytest.mark.parametrize(
    ("header_name", "column", "field"),
    [
        ("Status", "Status", "status"),
        ("STATUS", "STATUS", "status"),
        (" Status ", "Status", "status"),  # the CSV reader trims header names
        ("Error", "Error", "error"),
        ("eRRor ", "eRRor", "error"),
    ],
)
@pytest.mark.parametrize("mapped", [False, True])
def test_a_csv_status_or_error_column_in_any_case_left_unmapped_is_refused(
    header_name, column, field, mapped
):
    mapping = dict(BASE) if mapped else None
    error = _refused(lambda: import_bytes(_csv(header_name), filename="r.csv", mapping=mapping))
    assert (error.field, str(error)) == ("mapping", f"mapping: {_says(column, field)}")


def test_a_csv_status_column_in_any_case_is_read_when_mapped():
    data = b"case_id,input,output,Status,Error\nc1,q,a,ok,\nc2,q,,error,boom\n"
    mapping = {"case_id": "case_id", "input": "input", "output": "output"}
    import_bytes(data, filename="r.csv", mapping={**mapping, "status": "Status", "error": "Error"})
    stored = Trial.objects.order_by("case__key").values_list("case__key", "status", "error_message")
    assert list(stored) == [("c1", "ok", ""), ("c2", "error", "boom")]
    assert Run.objects.get().trials_errored == 1


@pytest.mark.parametrize(
    ("key", "field", "says"),
    [
        ("Status", "status", _says("Status", "status")),
        ("ERROR", "error", _says("ERROR", "error")),
        (
            " status ",
            "status",
            "the column ' status ' is not mapped: rename it status (the trial's status: ok, "
            "error or cancelled) or remove the column; an unmapped status would let a failed "
            "row pass for an ok trial",
        ),
    ],
)
@pytest.mark.parametrize("mapped", [False, True])
def test_a_jsonl_status_or_error_key_in_any_case_left_unmapped_is_refused(key, field, says, mapped):
    rows = [{"case_id": "c1", "input": "q", "passed": True}, {"case_id": "c2", "input": "q"}]
    rows[1][key] = "error" if field == "status" else "boom"
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    mapping = dict(BASE) if mapped else None
    error = _refused(lambda: import_bytes(data, filename="r.jsonl", fmt="jsonl", mapping=mapping))
    assert (error.field, str(error)) == ("mapping", f"line 2: mapping: {says}")


def test_a_jsonl_status_key_is_kept_as_extra_when_the_field_reads_another_key():
    rows = [{"case_id": "c1", "input": "q", "state": "error", "why": "boom", "Status": "x"}]
    data = json.dumps(rows[0]).encode() + b"\n"
    mapping = {"case_id": "case_id", "input": "input", "status": "state", "error": "why"}
    import_bytes(data, filename="r.jsonl", fmt="jsonl", mapping=mapping)
    trial = Trial.objects.get()
    assert (trial.status, trial.error_message) == ("error", "boom")
    assert trial.raw_response["extra"] == {"Status": "x"}


# --- the surfaces: command, upload page, import API, ingest API ----------------------------


def test_the_command_refuses_an_unmapped_status_column(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(_csv("Status"))
    with pytest.raises(CommandError) as caught:
        call_command("import_results", str(path), "--suite", "S", "--run", "R")
    assert str(caught.value).endswith(f"r.csv: mapping: {_says('Status', 'status')}")
    assert Run.objects.count() == Trial.objects.count() == 0


def test_the_upload_page_refuses_an_unmapped_status_column(client, carol):
    assert client.login(username=carol.username, password=PASSWORD)
    payload = {"suite": "S", "run": "R", "format": "", "suite_kind": "regression"}
    response = client.post(
        "/imports/new/",
        {
            **payload,
            "mapping": "",
            "threshold": "",
            "file": SimpleUploadedFile("r.csv", _csv("Status")),
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was imported. mapping: the column &#x27;Status&#x27; is not mapped" in page
    assert Run.objects.count() == Trial.objects.count() == 0


def test_the_import_api_refuses_an_unmapped_error_column(carol):
    response = _api(carol).post(
        "/api/imports",
        {
            "format": "csv",
            "suite": "S",
            "run": "R",
            "file": SimpleUploadedFile("r.csv", _csv("Error")),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"mapping: {_says('Error', 'error')}",
        "field": "mapping",
        "record": None,
    }
    assert Run.objects.count() == Trial.objects.count() == 0


def test_the_ingest_refuses_a_status_key_in_another_case_as_unknown(carol):
    trials = [{"case_id": "c1", "input": "q", "passed": True, "Status": "error"}]
    response = post_json(client_for(carol), header(trials=trials))
    assert response.status_code == 400
    body = response.json()
    assert (body["field"], body["record"]) == ("Status", 0)
    assert body["detail"].startswith("trials[0]: field Status: unknown field (fields: case_id,")
    assert row_counts() == NOTHING
