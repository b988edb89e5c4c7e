"""The API client (clients/python, ``assay_client.AssayClient``) against the real app, served
by Django's test client through an httpx transport: fault L1 (a limit is a total across
pages; rows ingested mid-walk neither repeat nor make it skip), ingest (NDJSON, idempotent,
retried under a key), the gate, reading runs and trials, and errors with the API's fields."""

from __future__ import annotations

import httpx
import pytest
from assay_client import AssayClient, AssayError
from django.test import Client

from apitokens.tokens import token_create
from evals.models import Run, Trial
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


def _client(user, transport: httpx.BaseTransport | None = None, **hooks) -> AssayClient:
    _, token = token_create(user=user, name="ci")
    client = AssayClient("http://testserver", token=token, transport=transport or DjangoTransport())
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
        with pytest.raises(AssayError) as error:
            assay.list("trials", status="done")
        assert error.value.status == 400 and "status" in error.value.body
        with pytest.raises(ValueError, match="limit: must be at least 1"):
            assay.list("trials", limit=0)


def _records(n: int = 8) -> list[dict]:
    return [
        {"case_id": f"c{i}", "input": "q", "output": "a", "passed": i % 4 > 0} for i in range(n)
    ]


def test_it_ingests_idempotently_and_gates_like_the_api(carol):
    header = {"suite": "S", "run": "base", "threshold": 0.5}
    with _client(carol) as assay:
        first = assay.ingest(header, _records(), idempotency_key="k-1")
        assert first["counts"] == {"cases": 8, "trials": 8, "grades": 8, "labels": 0}
        assert assay.ingest(header, _records(), idempotency_key="k-1") == first
        assert Run.objects.filter(name="base").count() == 1
        head = assay.ingest({**header, "run": "head"}, _records())
        decision = assay.gate(head=head["run"], base=first["run"])
        # Same outcomes in both runs: no regression, exit 0 (the gate's JSON).
        assert decision["decision"]["exit_code"] == 0
        with pytest.raises(AssayError) as error:
            assay.gate(head="not-a-uuid")
        assert error.value.status == 400 and error.value.field == "head"


def test_it_reads_a_run_its_trials_and_finds_a_run_by_name(carol):
    with _client(carol) as assay:
        posted = assay.ingest({"suite": "S", "run": "nightly"}, _records(3))
        run = assay.run(posted["run"])
        assert run["name"] == "nightly" and run["uuid"] == posted["run"]
        assert sorted(t["attempt"] for t in assay.trials(run=posted["run"])) == [1, 1, 1]
        assert assay.run_find(suite="S", run="nightly")["uuid"] == posted["run"]
        with pytest.raises(AssayError) as error:
            assay.run_find(suite="S", run="weekly")
        assert (error.value.status, error.value.field) == (404, "run")
        with pytest.raises(AssayError) as error:
            assay.run_find(suite="T", run="nightly")
        assert (error.value.status, error.value.field) == (404, "suite")


def test_errors_carry_the_api_fields(carol, bob):
    with _client(carol) as assay:
        records = _records(3)
        records[1]["passed"] = "true"
        with pytest.raises(AssayError) as error:
            assay.ingest({"suite": "S", "run": "r"}, records)
        # NDJSON: the header is line 1, so the second record is line 3.
        assert (error.value.status, error.value.field, error.value.record) == (400, "passed", 3)
        assert "HTTP 400 (field passed, record 3): line 3" in str(error.value)
        assert not Run.objects.exists()
        with pytest.raises(AssayError) as error:
            assay.list("trials", status="done")
        assert error.value.field == "status" and "unknown status 'done'" in error.value.detail
        with pytest.raises(AssayError) as error:
            assay.run("00000000-0000-0000-0000-000000000000")
        assert error.value.status == 404
    with _client(bob) as assay, pytest.raises(AssayError) as error:
        assay.ingest({"suite": "S", "run": "r"}, _records(1))
    assert error.value.status == 403


class Flaky(httpx.BaseTransport):
    """Fails the first ingest with a refused connection and the second with a 503, then
    passes requests to Django; keeps every ingest body it was given."""

    def __init__(self) -> None:
        self.django, self.bodies = DjangoTransport(), []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/ingest":
            self.bodies.append(request.read())
            if len(self.bodies) == 1:
                raise httpx.ConnectError("connection refused", request=request)
            if len(self.bodies) == 2:
                return httpx.Response(503, text="restarting", request=request)
        return self.django.handle_request(request)


def test_a_keyed_ingest_is_retried_with_the_same_bytes_and_an_unkeyed_one_is_not(carol):
    flaky = Flaky()
    with _client(carol, transport=flaky) as assay:
        answer = assay.ingest(
            {"suite": "S", "run": "r", "run_key": "ci-7"}, _records(), retry_wait_s=0
        )
    assert len(flaky.bodies) == 3 and len(set(flaky.bodies)) == 1
    assert answer["counts"]["trials"] == 8
    assert Run.objects.filter(name="r").count() == 1
    with _client(carol, transport=Flaky()) as assay, pytest.raises(httpx.ConnectError):
        assay.ingest({"suite": "S", "run": "r2"}, _records(), retry_wait_s=0)
    assert not Run.objects.filter(name="r2").exists()
