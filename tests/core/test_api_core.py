"""The REST API core: bearer tokens, roles, cursor pagination, previews, strict JSON."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from apitokens.tokens import token_create, token_revoke
from evals.models import Baseline, Run, Trial
from tests.report_builders import add_trial, make_run

GRADERS = [{"key": "exact", "kind": "exact_match", "config": {}, "gating": True}]


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        _, token = token_create(user=user, name="ci")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def run(db) -> Run:
    r = make_run(cases=[("c1", ["t"]), ("c2", [])], graders=GRADERS, n=1)
    add_trial(r, "c1", 1, grades={"exact": True})
    add_trial(r, "c2", 1, grades={"exact": False})
    return r


def test_it_answers_401_without_a_token_and_with_a_revoked_one(alice, run):
    assert APIClient().get("/api/runs/").status_code == 401
    row, token = token_create(user=alice, name="ci", by=alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/runs/").status_code == 200
    assert row.key_hash != token and token not in row.key_hash
    assert token_revoke(token=row, by=alice) is True
    assert client.get("/api/runs/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Bearer nope")
    assert client.get("/api/runs/").status_code == 401


def test_it_prints_a_token_once_from_the_command(alice, run):
    out = io.StringIO()
    call_command("token_create", "alice", "ci", stdout=out)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    assert client.get("/api/suites/").status_code == 200


@pytest.mark.parametrize("path", ["suites", "cases", "runs", "trials", "grades", "baselines"])
def test_it_lets_every_role_read_and_refuses_outsiders(path, alice, bob, carol, mallory, run):
    for user in (alice, bob, carol):
        assert client_for(user).get(f"/api/{path}/").status_code == 200
    assert client_for(mallory).get(f"/api/{path}/").status_code == 403


def test_it_caps_the_page_size_at_100_and_walks_every_page_once(bob, run):
    case = run.suite.cases.first()
    Trial.objects.bulk_create(Trial(run=run, case=case, attempt=a) for a in range(2, 252))
    client = client_for(bob)
    page = client.get("/api/trials/?page_size=1000").json()
    assert len(page["results"]) == 100
    seen, url = [], "/api/trials/?page_size=70"
    while url:
        page = client.get(url).json()
        seen += [t["uuid"] for t in page["results"]]
        url = page["next"]
    assert len(seen) == len(set(seen)) == 252


def test_it_lists_output_previews_and_details_the_whole_output(bob, run):
    trial = run.trials.first()
    trial.output = "é" * 2500
    trial.save()
    client = client_for(bob)
    rows = {t["uuid"]: t for t in client.get(f"/api/trials/?run={run.uuid}").json()["results"]}
    row = rows[str(trial.uuid)]
    assert row["output_preview"] == "é" * 2000 and row["output_length"] == 2500
    assert "output" not in row
    assert client.get(f"/api/trials/{trial.uuid}/").json()["output"] == "é" * 2500


def test_it_shows_the_run_report_on_the_detail_only(bob, run):
    client = client_for(bob)
    assert "report" not in client.get("/api/runs/").json()["results"][0]
    detail = client.get(f"/api/runs/{run.uuid}/").json()
    assert detail["status"] == "succeeded" and detail["report"]


def test_it_renders_nan_as_null_in_strict_json(bob, run):
    run.trials.update(latency_ms=float("nan"))
    body = client_for(bob).get(f"/api/trials/?run={run.uuid}").content.decode()
    assert "NaN" not in body
    assert all(
        t["latency_ms"] is None for t in json.loads(body, parse_constant=pytest.fail)["results"]
    )


def test_it_filters_cases_by_tag(bob, run):
    rows = client_for(bob).get("/api/cases/?tag=t").json()["results"]
    assert [r["key"] for r in rows] == ["c1"]


def test_it_sets_a_baseline_for_runners_only(bob, carol, run):
    assert client_for(bob).post("/api/baselines/set", {"run": str(run.uuid)}).status_code == 403
    response = client_for(carol).post("/api/baselines/set", {"run": str(run.uuid)})
    assert response.status_code == 201 and Baseline.objects.get().run == run


def test_it_names_the_field_when_a_run_start_is_bad(carol, run):
    response = client_for(carol).post(
        "/api/runs/start",
        {
            "suite": str(run.suite.uuid),
            "name": "R2",
            "target": {"kind": "nope"},
            "graders": GRADERS,
            "trials_per_case": 1,
        },
        format="json",
    )
    assert response.status_code == 400 and "kind" in response.json()["detail"]


def test_it_serves_the_openapi_schema(bob):
    response = client_for(bob).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200


def test_pages_walk_every_row_once_when_thousands_share_one_created_at(bob, run):
    """An ingest stamps every trial with one time: the cursor must not loop on the ties."""
    case = run.suite.cases.first()
    stamp = Trial.objects.first().created_at
    Trial.objects.bulk_create(
        Trial(run=run, case=case, attempt=a, created_at=stamp) for a in range(2, 2202)
    )
    client = client_for(bob)
    seen, url, pages = [], f"/api/trials/?run={run.uuid}&page_size=100", 0
    while url:
        page = client.get(url).json()
        seen += [t["uuid"] for t in page["results"]]
        url, pages = page["next"], pages + 1
        assert pages <= 23, "the cursor loops"
    assert len(seen) == len(set(seen)) == 2202 and pages == 23


@pytest.mark.parametrize("size", ["0", "-1", "ten", "1.5", "٣"])
def test_a_page_size_that_is_not_a_positive_integer_is_a_400(bob, run, size):
    response = client_for(bob).get(f"/api/trials/?page_size={size}")
    assert response.status_code == 400
    assert "page_size" in response.json()


@pytest.mark.parametrize(
    ("field", "value"),
    [("trials_per_case", 1.0), ("trials_per_case", "2"), ("suite", 7), ("name", 12)],
)
def test_run_start_refuses_a_value_of_the_wrong_json_type(carol, run, field, value):
    body = {
        "suite": str(run.suite.uuid),
        "name": "new",
        "target": {"kind": "simulated"},
        "graders": GRADERS,
        "trials_per_case": 1,
        field: value,
    }
    response = client_for(carol).post("/api/runs/start", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Run.objects.filter(name="new").exists()
