"""The Python API client (interop.client) against the real app over httpx's WSGI transport:
fault L1 (a limit is a total across pages; rows ingested mid-walk neither repeat nor make it
skip), the gate and ingest helpers, errors."""

from __future__ import annotations

import httpx
import pytest
from django.test import Client

from apitokens.services import token_create
from evals.models import Run, Trial
from interop.client import AssayApiError, AssayClient
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db
GRADERS = [{"key": "exact", "kind": "exact_match", "config": {}, "gating": True}]


class DjangoTransport(httpx.BaseTransport):
    """httpx requests served by Django's test client (same database connection and test
    transaction; httpx.WSGITransport would close the connection after each request)."""

    def __init__(self) -> None:
        self.client = Client()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url.raw_path.decode("ascii")
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "content-type")
        }
        response = self.client.generic(
            request.method,
            url,
            data=request.read(),
            content_type=request.headers.get("content-type", ""),
            headers=headers,
        )
        return httpx.Response(
            response.status_code,
            headers=dict(response.items()),
            content=response.content,
            request=request,
        )


def _client(user, **hooks) -> AssayClient:
    _, token = token_create(user=user, name="ci")
    client = AssayClient("http://testserver", token=token, transport=DjangoTransport())
    client._http.event_hooks = {"response": list(hooks.get("response", []))}
    return client


def test_fault_l1_a_limit_of_250_walks_3_pages_once_although_5_trials_arrive_midway(bob):
    run = make_run(cases=[(f"c{i:03d}", []) for i in range(255)], graders=GRADERS)
    for i in range(250):
        add_trial(run, f"c{i:03d}", 1, grades={"exact": True})
    pages: list[str] = []

    def ingest_five_after_the_first_page(response: httpx.Response) -> None:
        pages.append(str(response.request.url))
        if len(pages) == 1:
            for i in range(250, 255):
                add_trial(run, f"c{i:03d}", 1, grades={"exact": False})

    with _client(bob, response=[ingest_five_after_the_first_page]) as assay:
        trials = assay.list("trials", run=str(run.uuid), limit=250)
    assert Trial.objects.filter(run=run).count() == 255
    assert len(pages) == 3  # 100 + 100 + 50
    uuids = [t["uuid"] for t in trials]
    assert len(uuids) == len(set(uuids)) == 250
    first_250 = [
        str(u)
        for u in Trial.objects.filter(run=run)
        .order_by("created_at", "id")
        .values_list("uuid", flat=True)[:250]
    ]
    assert uuids == first_250


def test_without_a_limit_it_walks_every_row_and_a_bad_filter_is_an_error(bob):
    run = make_run(cases=[("c1", ["t"])], graders=GRADERS)
    add_trial(run, "c1", 1, grades={"exact": True})
    with _client(bob) as assay:
        assert [t["attempt"] for t in assay.list("trials", run=str(run.uuid))] == [1]
        with pytest.raises(AssayApiError) as error:
            assay.list("trials", status="done")
        assert error.value.status == 400 and "status" in error.value.body
        with pytest.raises(ValueError, match="limit: must be at least 1"):
            assay.list("trials", limit=0)


def test_it_ingests_idempotently_and_gates_like_the_api(carol):
    body = {
        "suite": "S",
        "run": "base",
        "threshold": 0.5,
        "trials": [
            {"case_id": f"c{i}", "input": "q", "output": "a", "passed": i % 4 > 0} for i in range(8)
        ],
    }
    with _client(carol) as assay:
        first = assay.ingest(body, idempotency_key="k-1")
        assert assay.ingest(body, idempotency_key="k-1") == first
        assert Run.objects.filter(name="base").count() == 1
        head = assay.ingest({**body, "run": "head"})
        decision = assay.gate(head=head["run"], base=first["run"])
        # Same outcomes in both runs: no regression, exit 0 (the gate's JSON).
        assert decision["decision"]["exit_code"] == 0
        with pytest.raises(AssayApiError) as error:
            assay.gate(head="not-a-uuid")
        assert error.value.status == 400
