"""GET /api/trials/: the list reads rows, not models (issue 17). Each row is what the model
serializer makes of the same trial, and the queries of a page do not grow with the run."""

from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from evals.api.runs.trials import TrialSerializer
from evals.models import Trial
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _run(n_cases: int, name: str):
    run = make_run(
        cases=[(f"k{i}", ["t"]) for i in range(n_cases)],
        graders=[{"key": "a", "kind": "exact"}],
        n=2,
        name=name,
        suite=name,
    )
    for i in range(n_cases):
        add_trial(run, f"k{i}", 1, grades={"a": True}, cost="0.00000051", tokens=(10, None))
        add_trial(run, f"k{i}", 2, status="error", error="<b>boom</b>", latency=12.5)
    return run


def test_a_list_row_is_the_model_serializer_s_representation(bob):
    run = _run(3, "R")
    Trial.objects.filter(run=run, attempt=1).update(cost_usd=Decimal("1.5"))
    rows = _client(bob).get(f"/api/trials/?run={run.uuid}").json()["results"]
    assert len(rows) == 6
    trials = {
        str(t.uuid): t
        for t in Trial.objects.filter(run=run)
        .select_related("run", "case")
        .extra(select={"output_preview": "''", "output_length": "10"})
    }
    for row in rows:
        trial = trials[row["uuid"]]
        trial.output_preview = trial.output
        expected = TrialSerializer(trial).data
        assert row == {k: expected[k] for k in expected}, row
    assert {r["cost_usd"] for r in rows} == {"1.500000000000", None}


def test_a_list_row_reads_times_in_the_viewer_s_zone_as_the_model_serializer_does(bob):
    run = _run(2, "Z")
    client = _client(bob)
    client.cookies["assay_tz"] = "Asia/Kolkata"
    rows = client.get(f"/api/trials/?run={run.uuid}").json()["results"]
    created = {str(t.uuid): t.created_at for t in Trial.objects.filter(run=run)}
    with timezone.override(ZoneInfo("Asia/Kolkata")):
        field = TrialSerializer().fields["created_at"]
        expected = {uuid: field.to_representation(at) for uuid, at in created.items()}
    assert {row["uuid"]: row["created_at"] for row in rows} == expected
    assert all(row["created_at"].endswith("+05:30") for row in rows)


def test_a_page_s_queries_do_not_grow_with_the_run(bob):
    small, large = _run(3, "small"), _run(60, "large")
    client = _client(bob)
    client.get("/api/trials/")  # the user's roles are read once, then kept on the user
    counts = []
    for run in (small, large):
        with CaptureQueriesContext(connection) as ctx:
            page = client.get(f"/api/trials/?run={run.uuid}&page_size=100").json()
        assert len(page["results"]) == len(run.trials.all()[:100])
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] == 3  # the run exists (else a 404), the page, its runs
