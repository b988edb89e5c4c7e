"""An errored (or cancelled) trial carries no verdict and is never labeled: the ingest API
refuses non-empty ``labels`` on a record that is not ok, and a labeled-records file refuses a
record or response that says it errored, each naming the record and field, nothing written."""

from __future__ import annotations

import pytest

from core.errors import DomainError
from evals.models import Case, Run, Trial
from labeling.models import Label
from tests.import_helpers import import_bytes, jsonl, record
from tests.interop.test_api_ingest import (
    NOTHING,
    client_for,
    header,
    ndjson,
    post_json,
    post_ndjson,
    row_counts,
)

pytestmark = pytest.mark.django_db

LABEL = {"reviewer": "dana", "verdict": "fail"}


@pytest.mark.parametrize(
    ("change", "got"),
    [
        ({"status": "error", "error": "boom", "labels": [LABEL]}, "'error' carries no verdict"),
        (
            {
                "status": "error",
                "error_message": "boom",
                "labels": [LABEL, {**LABEL, "reviewer": "eve"}],
            },
            "'error' carries no verdict",
        ),
        ({"status": "cancelled", "labels": [LABEL]}, "'cancelled' carries no verdict"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_the_ingest_refuses_labels_on_a_record_that_is_not_ok(carol, change, got, fmt):
    trials = [
        {"case_id": "c1", "input": "q", "labels": [LABEL]},
        {"case_id": "c2", "input": "q", **change},
    ]
    if fmt == "json":
        response = post_json(client_for(carol), header(trials=trials))
        where, record = "trials[1]", 1
    else:
        response = post_ndjson(client_for(carol), ndjson(header(), trials))
        where, record = "line 3", 3
    assert response.status_code == 400, response.content
    n = len(change["labels"])
    status = change["status"]
    message = (
        f"a trial with status {status!r} carries no verdict and is never labeled "
        f"(got {n} label{'' if n == 1 else 's'}): leave labels out"
    )
    assert got in message
    assert response.json() == {
        "detail": f"{where}: field labels: {message}",
        "record": record,
        "field": "labels",
    }
    assert row_counts() == NOTHING


@pytest.mark.parametrize("labels", [[], None])
def test_the_ingest_takes_an_errored_record_with_no_labels(carol, labels):
    trials = [
        {"case_id": "c1", "input": "q", "labels": [LABEL]},
        {"case_id": "c2", "input": "q", "status": "error", "error": "boom", "labels": labels},
    ]
    response = post_json(client_for(carol), header(trials=trials))
    assert response.status_code == 201, response.content
    assert list(Label.objects.values_list("trial__case__key", "verdict")) == [("c1", "fail")]
    errored = Trial.objects.get(case__key="c2")
    assert (errored.status, errored.error_message) == ("error", "boom")


# --- labeled records --------------------------------------------------------------------------


def _refused(data: bytes) -> DomainError:
    with pytest.raises(DomainError) as caught:
        import_bytes(data)
    assert Run.objects.count() == Trial.objects.count() == Case.objects.count() == 0
    assert Label.objects.count() == 0
    return caught.value


def _response(**changes) -> list[dict]:
    return [{"response_id": "R", "model": "m", "text": "", **changes}]


@pytest.mark.parametrize(
    ("changes", "field", "got"),
    [
        ({"status": "error"}, "status", "got status 'error'"),
        ({"Status": "failed"}, "Status", "got status 'failed'"),
        ({" ERROR ": "timeout"}, " ERROR ", "got an error 'timeout'"),
        (
            {"responses": _response(error="HTTP 500")},
            "responses[0].error",
            "got an error 'HTTP 500'",
        ),
        ({"responses": _response(Status="error")}, "responses[0].Status", "got status 'error'"),
    ],
)
def test_a_labeled_record_that_errored_is_refused_naming_the_field(changes, field, got):
    error = _refused(jsonl([record(id="ok"), record(id="bad", **changes)]))
    message = (
        f"a labeled record holds ok trials only, {got}: an errored trial carries no verdict "
        "and is never labeled; leave it out"
    )
    assert (error.field, str(error)) == (field, f"line 2: field {field}: {message}")


def test_a_labeled_record_saying_ok_or_no_error_is_stored():
    changes = {"status": "ok", "error": None, "responses": _response(text="fine", error="")}
    import_bytes(jsonl([record(id="r1", **changes)]))
    trial = Trial.objects.get()
    assert (trial.case.key, trial.status, trial.output) == ("r1", "ok", "fine")
    assert Label.objects.count() == 1
