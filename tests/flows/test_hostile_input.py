"""Hostile input is a 4xx naming the field, never a 500 (findings of a new-user trial):
extreme dates, tiny alpha, deeply nested JSON, malformed ids, oversized bodies, wording."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from core.errors import DomainError, value_shown
from evals.comparison.gate import ALPHA_MAX, ALPHA_MIN, alpha_check
from evals.comparison.run_data import run_data_from_file
from evals.models import Case, Grade, Run, Suite, Trial
from interop.run_file import run_export, run_import
from tests.comparison_builders import db_run, judge_version
from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

STEADY = {f"c{i}": "PPPF" for i in range(6)}
LATE = "9999-12-31T23:59:59-05:00"
EARLY = "0001-01-01T00:00:00+05:00"
RANGE = "from 1900-01-01T00:00:00Z to 2999-12-31T23:59:59Z (in UTC)"
NESTED = b'{"head":' + b"[" * 1000 + b"]" * 1000 + b"}"
DEEPLY = "nested too deeply (more than 64 arrays/objects inside each other)"
NESTED_ERROR = f"JSON parse error - {DEEPLY}"


def counts() -> dict[str, int]:
    return {
        "suites": Suite.objects.count(),
        "runs": Run.objects.count(),
        "cases": Case.objects.count(),
        "trials": Trial.objects.count(),
        "grades": Grade.objects.count(),
    }


NOTHING = {"suites": 0, "runs": 0, "cases": 0, "trials": 0, "grades": 0}


@pytest.fixture
def runs():
    v = judge_version(1)
    return db_run(STEADY, name="B", version=v), db_run(STEADY, name="H", version=v)


# ---- 1. extreme dates ----------------------------------------------------------------


def _ingest(user, created_at: str):
    body = {
        "suite": "S",
        "run": "r1",
        "trials": [
            {"case_id": "c1", "input": "q", "output": "a", "passed": True},
            {
                "case_id": "c2",
                "input": "q2",
                "output": "a",
                "passed": True,
                "created_at": created_at,
            },
        ],
    }
    return client_for(user).post(
        "/api/ingest", data=json.dumps(body), content_type="application/json"
    )


@pytest.mark.parametrize(
    "value",
    [
        LATE,
        EARLY,
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "1899-12-31T23:59:59Z",
        "3000-01-01T00:00:00-01:00",
    ],
)
def test_ingest_refuses_a_time_outside_the_supported_range_naming_record_and_field(carol, value):
    response = _ingest(carol, value)
    assert response.status_code == 400, response.content
    assert response.json() == {
        "detail": f"trials[1]: field created_at: expected a date-time {RANGE}, got {value!r}",
        "record": 1,
        "field": "created_at",
    }
    assert counts() == NOTHING


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("1900-01-01T00:00:00Z", "1900-01-01T00:00:00+00:00"),
        ("2999-12-31T23:59:59Z", "2999-12-31T23:59:59+00:00"),
        ("3000-01-01T05:00:00+06:00", "2999-12-31T23:00:00+00:00"),
    ],
)
def test_ingest_stores_times_at_the_edges_of_the_range(carol, value, stored):
    assert _ingest(carol, value).status_code == 201
    assert Trial.objects.get(case__key="c2").created_at.isoformat() == stored


def _csv(created_at: str) -> bytes:
    return (
        "case_id,input,output,passed,created_at\n"
        "c1,q,a,true,2025-02-24T15:30:00Z\n"
        f"c2,q2,a,true,{created_at}\n"
    ).encode()


@pytest.mark.parametrize("value", [LATE, EARLY])
def test_a_csv_import_refuses_a_time_outside_the_range(carol, value):
    response = client_for(carol).post(
        "/api/imports",
        {
            "file": SimpleUploadedFile("r.csv", _csv(value)),
            "format": "csv",
            "suite": "S",
            "run": "R",
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content
    assert (
        f"row 2 (line 3): field created_at: expected a date-time {RANGE}, got {value!r}"
    ) in response.content.decode()
    assert counts() == NOTHING


@pytest.mark.parametrize("value", [LATE, EARLY])
def test_the_upload_page_refuses_a_time_outside_the_range(client, carol, value):
    assert client.login(username=carol.username, password=PASSWORD)
    response = client.post(
        "/imports/new/",
        {
            "file": SimpleUploadedFile("r.csv", _csv(value)),
            "suite": "S",
            "run": "R",
            "format": "csv",
            "suite_kind": "regression",
            "mapping": "",
            "threshold": "",
        },
    )
    assert response.status_code == 400
    assert (
        f"row 2 (line 3): field created_at: expected a date-time {RANGE}, got {value!r}"
    ).replace("'", "&#x27;") in response.content.decode()
    assert counts() == NOTHING


@pytest.mark.parametrize("value", [LATE, EARLY, "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
def test_a_run_file_refuses_a_time_outside_the_range_naming_the_field(value):
    data = run_export(run=db_run(STEADY, name="B"))
    data["cases"][0]["trials"][0]["created_at"] = value
    before = counts()
    with pytest.raises(DomainError) as info:
        run_import(data=data, name="copy")
    assert str(info.value) == (
        f"cases[0].trials[0].created_at: {value!r} is outside the supported range: a time {RANGE}"
    )
    assert counts() == before


# ---- 2. alpha ------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1e-20, 1e-7, 0.51, 0.0, 1.0, float("nan"), True])
def test_one_rule_refuses_an_alpha_outside_1e_6_to_0_5(alpha):
    with pytest.raises(DomainError) as info:
        alpha_check(alpha)
    assert info.value.field == "alpha"
    # shown as the request wrote it: JSON's true and NaN, not Python's True and nan
    assert str(info.value) == f"alpha must be a number from 1e-06 to 0.5, got {value_shown(alpha)}"


@pytest.mark.parametrize("alpha", [ALPHA_MIN, 0.05, ALPHA_MAX])
def test_one_rule_accepts_the_edges(alpha):
    assert alpha_check(alpha) == alpha


def test_post_gate_with_a_tiny_alpha_is_a_400_naming_alpha(carol, runs):
    base, head = runs
    response = client_for(carol).post(
        "/api/gate", {"base": str(base.uuid), "head": str(head.uuid), "alpha": 1e-20}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"alpha": ["alpha must be a number from 1e-06 to 0.5, got 1e-20"]}


@pytest.mark.parametrize("alpha", ["1e-21", "0.000000000000000000001", "0.0000001", "0.6"])
def test_get_comparisons_with_an_alpha_out_of_range_is_a_400_naming_alpha(bob, runs, alpha):
    base, head = runs
    response = client_for(bob).get(
        f"/api/comparisons/?base={base.uuid}&head={head.uuid}&alpha={alpha}"
    )
    assert response.status_code == 400
    assert list(response.json()) == ["alpha"]


def test_get_comparisons_accepts_the_smallest_alpha(bob, runs):
    base, head = runs
    response = client_for(bob).get(
        f"/api/comparisons/?base={base.uuid}&head={head.uuid}&alpha=0.000001"
    )
    assert response.status_code == 200
    assert response.json()["comparison"]["alpha"] == 1e-6


def test_the_gate_command_exits_3_on_a_tiny_alpha_never_1(runs):
    base, head = runs
    with pytest.raises(CommandError) as info:
        call_command("gate", "--base", str(base.uuid), "--head", str(head.uuid), "--alpha", "1e-20")
    assert info.value.returncode == 3
    assert str(info.value) == "--alpha must be a number from 1e-06 to 0.5, got 1e-20"


# ---- 3. deeply nested JSON -----------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/api/gate", "/api/runs/start", "/api/baselines/set", "/api/labels", "/api/judge-runs"]
)
def test_a_body_nested_1000_deep_is_a_400_parse_error(alice, url):
    response = client_for(alice).post(url, data=NESTED, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {"detail": NESTED_ERROR}


@pytest.mark.parametrize("url", ["/api/gate", "/api/runs/start", "/api/baselines/set"])
def test_a_body_nested_past_the_limit_but_not_the_recursion_is_a_400_too(alice, url):
    body = b'{"head":' + b"[" * 100 + b"]" * 100 + b"}"
    response = client_for(alice).post(url, data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": NESTED_ERROR}


def test_ingest_keeps_its_400_for_a_nested_body(carol):
    response = client_for(carol).post("/api/ingest", data=NESTED, content_type="application/json")
    assert response.status_code == 400
    assert counts() == NOTHING


DEEP = "[" * 1000 + "]" * 1000
JSONL_DEEP = (
    '{"case_id":"c1","input":"q","output":"a","passed":true}\n'
    '{"case_id":"c2","input":"q","output":"a","passed":true,"x":' + DEEP + "}\n"
)
PROMPTFOO_HEAD = '{"evalId":"e","results":{"results":'  # 2 levels open before DEEP
INSPECT_HEAD = '{"eval":{},"samples":'  # 1 level open before DEEP
JSONL_COLUMN = len('{"case_id":"c2","input":"q","output":"a","passed":true,"x":') + 64


@pytest.mark.parametrize(
    ("fmt", "name", "data", "message"),
    [
        (
            "jsonl",
            "r.jsonl",
            JSONL_DEEP,
            f"line 2: invalid JSON: {DEEPLY}: "
            f"line 1 column {JSONL_COLUMN} (char {JSONL_COLUMN - 1})",
        ),
        (
            "promptfoo",
            "results.json",
            PROMPTFOO_HEAD + DEEP + "}}",
            f"line 1 column {len(PROMPTFOO_HEAD) + 63}: invalid JSON: {DEEPLY}",
        ),
        (
            "inspect",
            "log.json",
            INSPECT_HEAD + DEEP + "}",
            f"line 1 column {len(INSPECT_HEAD) + 64}: invalid JSON: {DEEPLY}",
        ),
        (
            "",
            "r.jsonl",
            JSONL_DEEP,
            f"line 2: invalid JSON: {DEEPLY}: "
            f"line 1 column {JSONL_COLUMN} (char {JSONL_COLUMN - 1})",
        ),
        (
            "",
            "r.jsonl",
            '{"x":' + DEEP + "}\n",
            f"line 1: invalid JSON: {DEEPLY}: line 1 column 69 (char 68)",
        ),
    ],
)
def test_a_nested_import_file_is_a_400_naming_the_line(carol, client, fmt, name, data, message):
    response = client_for(carol).post(
        "/api/imports",
        {"file": SimpleUploadedFile(name, data.encode()), "format": fmt, "suite": "S", "run": "R"},
        format="multipart",
    )
    assert response.status_code == 400, response.content
    assert message in response.content.decode()
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.post(
        "/imports/new/",
        {
            "file": SimpleUploadedFile(name, data.encode()),
            "suite": "S",
            "run": "R",
            "format": fmt,
            "suite_kind": "regression",
            "mapping": "",
            "threshold": "",
        },
    )
    assert page.status_code == 400
    assert message in page.content.decode()
    assert counts() == NOTHING


# ---- 4. malformed ids on the adjudication page ---------------------------------------


# (a NUL in any query parameter is a 400 before any page reads it: tests/flows/test_hostile_text.py)
@pytest.mark.parametrize("query", ["set=zzz", "suite=zzz", "set=1"])
def test_a_malformed_id_on_the_adjudication_page_is_a_400(client, alice, query):
    # issue 13: a malformed query parameter is a 400 naming it (a well-formed unknown
    # UUID stays a 404: tests/flows/test_query_params.py)
    assert client.login(username=alice.username, password=PASSWORD)
    response = client.get(f"/adjudication/?{query}")
    assert response.status_code == 400
    assert f"{query.split('=')[0]}: expected a UUID" in response.content.decode()


# ---- 5. oversized bodies -------------------------------------------------------------


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_over_the_upload_limit_is_a_json_413(carol, runs):
    base, head = runs
    body = json.dumps({"base": str(base.uuid), "head": str(head.uuid), "pad": "x" * 2000})
    response = client_for(carol).post("/api/gate", data=body, content_type="application/json")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "The request body is larger than the limit of 1000 bytes "
        "(DATA_UPLOAD_MAX_MEMORY_SIZE).",
        "limit": 1000,
    }


# ---- 6. wording: the threshold is named as the caller gives it ------------------------


def test_a_score_without_a_threshold_names_the_threshold_field(carol):
    data = b"case_id,input,output,score\nc1,q,a,0.7\n"
    response = client_for(carol).post(
        "/api/imports",
        {"file": SimpleUploadedFile("r.csv", data), "format": "csv", "suite": "S", "run": "R"},
        format="multipart",
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert (
        "row 1 (line 2): field score: a score without a passed verdict needs a pass "
        "threshold: give threshold, a number in [0, 1]"
    ) in text
    assert "--threshold" not in text


def test_the_gate_command_exits_3_on_a_nested_run_file(runs, tmp_path):
    path = tmp_path / "head.json"
    path.write_bytes(NESTED)
    with pytest.raises(CommandError) as info:
        call_command("gate", "--base", str(runs[0].uuid), "--head", str(path))
    assert info.value.returncode == 3
    assert str(info.value) == f"{path}: cannot read a run file (JSON nested too deeply)"


def test_import_run_and_run_files_refuse_json_nested_thousands_deep(tmp_path, db):

    path = tmp_path / "deep.json"
    path.write_text('{"format": "assay-run", "run": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(CommandError, match="nested too deeply"):
        call_command("import_run", str(path))
    with pytest.raises(DomainError, match="nested too deeply"):
        run_data_from_file(path)


# ---- an unbounded target number ------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"concurrency": 2000}, "target.concurrency"),
        ({"max_attempts": 1_000_000}, "target.max_attempts"),
        ({"timeout_s": 1e300}, "target.timeout_s"),
    ],
)
def test_a_run_start_with_an_out_of_bounds_target_number_is_a_400(carol, change, field):
    """Found by a new user: ``"concurrency": 100000000000`` held the web process building
    one HTTP client per 8 calls in flight (3.7 GB and growing, SIGTERM ignored) before the
    run was even saved. Every such number now has an upper bound, refused naming the field."""
    suite = Suite.objects.create(name="S")
    Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    body = {
        "suite": str(suite.uuid),
        "name": "r",
        "trials_per_case": 1,
        "graders": [{"key": "x", "kind": "contains", "config": {"value": "a"}}],
        "target": {
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "prompt_template": "$input",
            **change,
        },
    }
    response = client_for(carol).post("/api/runs/start", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == field
    assert Run.objects.count() == 0
