"""The case size rule of every path (``evals.cases.size_problem``: input, expected, context
and goal_state each at most 200,000 characters as compact JSON) on every importer and
import surface: refused naming the row or record and the field, code ``too_large`` (the API
answers 413, as the case API does), nothing written."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from core.errors import DomainError
from evals.cases import FIELD_MAX_CHARS, CaseSpec, size_problem
from evals.models import Case, Run, Trial
from interop import exports
from interop.importers import trial_row
from tests.conftest import PASSWORD, PROJECT_DIR
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
from tests.interop.test_csv_round_trip import _run
from tests.interop.test_import_case_rules import _import_run, _run_file, _set
from tests.interop.test_import_trial_status import _api

pytestmark = pytest.mark.django_db

BIG = "x" * 300_000  # 300,002 characters as JSON
TOO_LARGE = "300,002 characters as JSON; at most 200,000"
INTEROP = PROJECT_DIR / "tests" / "fixtures" / "interop"


def _refused(call) -> DomainError:
    with pytest.raises(DomainError) as caught:
        call()
    assert Run.objects.count() == Trial.objects.count() == Case.objects.count() == 0
    return caught.value


# --- the rule itself ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x" * (FIELD_MAX_CHARS - 2), None),  # 200,000 with its quotes
        ("x" * (FIELD_MAX_CHARS - 1), ("input", "200,001 characters as JSON; at most 200,000")),
        ("é" * (FIELD_MAX_CHARS - 2), None),  # characters, not bytes
        ("\x01" * 33_333, None),  # each written \u0001: 199,998 + 2
        ("\x01" * 33_334, ("input", "200,006 characters as JSON; at most 200,000")),
    ],
)
def test_size_problem_counts_the_characters_of_the_compact_json(text, problem):
    assert size_problem(CaseSpec(key="k", input=text)) == problem


def test_size_problem_names_the_first_field_over_the_limit():
    spec = CaseSpec(key="k", input="q", expected={"a": BIG}, goal_state=BIG)
    assert size_problem(spec) == ("expected", "300,008 characters as JSON; at most 200,000")
    spec = CaseSpec(key="k", input="q", context=[{"id": "d", "text": BIG}])
    assert size_problem(spec) == ("context", "300,022 characters as JSON; at most 200,000")


# --- CSV and JSONL: the command, the upload page, the import API ----------------------------


@pytest.mark.parametrize("field", ["input", "expected"])
def test_a_jsonl_row_over_the_limit_is_refused_naming_line_and_field(field):
    rows = [{"case_id": "c1", "input": "q"}, {"case_id": "c2", "input": "q", field: BIG}]
    error = _refused(lambda: import_bytes(jsonl(rows), filename="r.jsonl", fmt="jsonl"))
    assert (error.field, error.code, str(error)) == (
        field,
        "too_large",
        f"line 2: field {field}: {TOO_LARGE}",
    )


def test_a_csv_row_over_the_limit_is_refused_naming_row_and_field():
    data = f"case_id,input,expected\nc1,q,a\nc2,q,{BIG}\n".encode()
    error = _refused(lambda: import_bytes(data, filename="r.csv"))
    assert (error.field, str(error)) == ("expected", f"row 2 (line 3): field expected: {TOO_LARGE}")


def test_the_command_refuses_a_row_over_the_limit(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text(f"case_id,input\nc1,q\nc2,{BIG}\n")
    with pytest.raises(CommandError) as caught:
        call_command("import_results", str(path), "--suite", "S", "--run", "R")
    assert str(caught.value).endswith(f"r.csv: row 2 (line 3): field input: {TOO_LARGE}")
    assert Run.objects.count() == Case.objects.count() == 0


def test_the_upload_page_refuses_a_row_over_the_limit(client, carol):
    assert client.login(username=carol.username, password=PASSWORD)
    data = f"case_id,input\nc1,q\nc2,{BIG}\n".encode()
    payload = {"suite": "S", "run": "R", "format": "", "suite_kind": "regression"}
    response = client.post(
        "/imports/new/",
        {**payload, "mapping": "", "threshold": "", "file": SimpleUploadedFile("r.csv", data)},
    )
    assert response.status_code == 400
    assert (
        f"Nothing was imported. row 2 (line 3): field input: {TOO_LARGE}"
        in response.content.decode()
    )
    assert Run.objects.count() == Case.objects.count() == 0


def test_the_import_api_answers_413_naming_the_row_and_field(carol):
    data = f"case_id,input\nc1,q\nc2,{BIG}\n".encode()
    response = _api(carol).post(
        "/api/imports",
        {"format": "csv", "suite": "S", "run": "R", "file": SimpleUploadedFile("r.csv", data)},
        format="multipart",
    )
    assert response.status_code == 413
    assert response.json() == {
        "detail": f"row 2 (line 3): field input: {TOO_LARGE}",
        "field": "input",
        "record": None,
    }
    assert Run.objects.count() == Case.objects.count() == 0


def test_the_case_of_repeated_attempts_is_measured_once(monkeypatch):
    calls = []
    real = trial_row.case_size_check

    def counted(case, **kwargs):
        calls.append(case.key)
        return real(case, **kwargs)

    monkeypatch.setattr(trial_row, "case_size_check", counted)
    big = "y" * (FIELD_MAX_CHARS - 2)  # at the limit: measured, accepted
    rows = [{"case_id": "c1", "input": big, "attempt": a} for a in range(1, 6)]
    import_bytes(jsonl(rows), filename="r.jsonl", fmt="jsonl")
    assert calls == ["c1"]
    assert Trial.objects.count() == 5
    assert Case.objects.get().input == big


# --- the ingest API -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "size"),
    [
        ({"input": BIG}, "input", "300,002"),
        ({"expected": BIG}, "expected", "300,002"),
        ({"goal_state": {"a": BIG}}, "goal_state", "300,008"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_the_ingest_answers_413_naming_the_record_and_field(carol, change, field, size, fmt):
    trials = [{"case_id": "c1", "input": "q"}, {"case_id": "c2", "input": "q", **change}]
    if fmt == "json":
        response = post_json(client_for(carol), header(trials=trials))
        where, record = "trials[1]", 1
    else:
        response = post_ndjson(client_for(carol), ndjson(header(), trials))
        where, record = "line 3", 3
    assert response.status_code == 413, response.content
    message = f"{size} characters as JSON; at most 200,000"
    assert response.json() == {
        "detail": f"{where}: field {field}: {message}",
        "field": field,
        "record": record,
    }
    assert row_counts() == NOTHING


# --- the other importers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "size"),
    [
        ({"input": BIG}, "input", "300,002"),
        ({"context": [{"doc_id": "d", "text": BIG}]}, "context", "300,022"),
    ],
)
def test_a_labeled_record_over_the_limit_is_refused(change, field, size):
    data = jsonl([record(id="ok"), record(id="big", **change)])
    error = _refused(lambda: import_bytes(data))
    assert (error.field, error.code, str(error)) == (
        field,
        "too_large",
        f"line 2: field {field}: {size} characters as JSON; at most 200,000",
    )


def _inspect(edit) -> bytes:
    doc = json.loads((INTEROP / "inspect" / "log.json").read_bytes())
    edit(doc["samples"][1])
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("name", "field", "size"),
    [("input", "samples[1].input", "300,002"), ("target", "samples[1].target", "300,002")],
)
def test_an_inspect_sample_over_the_limit_is_refused(name, field, size):
    data = _inspect(lambda sample: sample.__setitem__(name, BIG))
    error = _refused(lambda: import_bytes(data, filename="log.json", fmt="inspect"))
    assert (error.field, error.code, error.message) == (
        field,
        "too_large",
        f"{size} characters as JSON; at most 200,000",
    )


def test_an_inspect_goal_state_over_the_limit_is_refused():
    data = _inspect(lambda sample: sample["metadata"].__setitem__("goal_state", {"a": BIG}))
    error = _refused(lambda: import_bytes(data, filename="log.json", fmt="inspect"))
    assert (error.field, error.message) == (
        "samples[1].metadata.goal_state",
        "300,008 characters as JSON; at most 200,000",
    )


def test_a_promptfoo_row_over_the_limit_is_refused():
    doc = json.loads((INTEROP / "promptfoo" / "results.json").read_bytes())
    doc["results"]["results"][1]["testCase"]["vars"]["p"] = BIG
    data = json.dumps(doc).encode()
    error = _refused(lambda: import_bytes(data, filename="results.json", fmt="promptfoo"))
    assert error.field == "results.results[1].testCase.vars"
    assert error.code == "too_large"
    assert error.message.endswith(" characters as JSON; at most 200,000")


def test_a_run_export_row_over_the_limit_is_refused():
    body = exports.table_csv(exports.run_table(run=_run()))
    rows = list(csv.DictReader(io.StringIO(body.decode("utf-8"), newline="")))
    rows = copy.deepcopy(rows)
    rows[1].update(content_hash="", input=BIG)
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    with pytest.raises(DomainError) as caught:
        import_bytes(out.getvalue().encode(), filename="export.csv", suite="S", run="again")
    assert str(caught.value) == f"row 2 (line 3): field input: {TOO_LARGE}"
    assert caught.value.code == "too_large"
    assert not Run.objects.filter(name="again").exists()


def test_import_run_refuses_a_case_over_the_limit(tmp_path):
    file = _run_file(tmp_path, _set("cases.0.input", BIG))
    with pytest.raises(CommandError) as caught:
        _import_run(file)
    assert str(caught.value) == f"{file}: cases[0].input: {TOO_LARGE}"
    assert not Run.objects.filter(suite__name="S2").exists()
