"""``POST /api/runs/prune``: leads delete finished runs in batches; engineers, reviewers and
outsiders are refused (403) and nothing is deleted."""

from __future__ import annotations

import pytest

from evals.models import Run, RunPrune
from tests.core.test_api_core import client_for
from tests.evals.test_prune import _run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who", ["carol", "bob", "mallory"])
def test_only_a_lead_may_prune(who, request):
    run = _run("old")
    user = request.getfixturevalue(who)
    response = client_for(user).post(
        "/api/runs/prune",
        {"older_than_days": 30, "dry_run": False},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert Run.objects.filter(id=run.id).exists() and not RunPrune.objects.exists()


def test_a_lead_prunes_through_the_api_and_it_is_recorded(alice):
    old = _run("old")
    _run("new", days_ago=1)
    api = client_for(alice)
    dry = api.post(
        "/api/runs/prune", {"older_than_days": 30, "dry_run": True}, content_type="application/json"
    )
    assert dry.status_code == 200
    assert [r["name"] for r in dry.json()["runs"]] == ["old"] and Run.objects.count() == 2

    response = api.post(
        "/api/runs/prune",
        {"runs": [str(old.uuid)], "dry_run": False, "batch_size": 1},
        content_type="application/json",
    )
    body = response.json()
    assert response.status_code == 200, body
    assert (body["trials"], body["grades"], body["errors"]) == (2, 2, [])
    assert list(Run.objects.values_list("name", flat=True)) == ["new"]
    record = RunPrune.objects.get()
    assert (record.by, record.via, record.run_uuid) == (alice, "api", old.uuid)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"dry_run": True}, 400, "older_than_days"),
        ({"older_than_days": 0, "dry_run": True}, 400, "older_than_days"),
        ({"keep_last": 1, "dry_run": True, "batch_size": 0}, 400, "batch_size"),
        ({"keep_last": 1}, 400, "dry_run"),
        ({"runs": ["00000000-0000-0000-0000-000000000000"], "dry_run": True}, 404, "run_uuids"),
    ],
)
def test_bad_input_names_its_field(alice, body, status, field):
    response = client_for(alice).post("/api/runs/prune", body, content_type="application/json")
    assert response.status_code == status, response.json()
    assert field in str(response.json())
