"""POST /api/ingest: JSON and NDJSON, all or nothing, idempotency, limits, roles (faults C1,
F1, H1)."""

from __future__ import annotations

import hashlib
import json
import threading
from decimal import Decimal

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apitokens.tokens import token_create
from core import bounds
from evals.models import Case, Grade, IngestKey, Run, Suite, Trial
from interop.ingest import sources as ingest_sources
from interop.ingest import submit as ingest_submit_module
from labeling.models import Label

URL = "/api/ingest"
NDJSON = "application/x-ndjson"


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        _, token = token_create(user=user, name="ci")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def header(**changes) -> dict:
    return {"suite": "ingest-suite", "run": "r1", **changes}


def trial(i: int, **changes) -> dict:
    return {
        "case_id": f"c{i}",
        "input": f"question {i}",
        "output": f"answer {i}",
        "passed": i % 2 == 0,
        **changes,
    }


def post_json(client, body: dict, **extra):
    return client.post(URL, data=json.dumps(body), content_type="application/json", **extra)


def ndjson(head: dict, records: list, *, raw_lines: list[str] | None = None) -> str:
    lines = [json.dumps(head)] + [json.dumps(r) for r in records] + (raw_lines or [])
    return "\n".join(lines) + "\n"


def post_ndjson(client, text: str, **extra):
    return client.post(URL, data=text.encode(), content_type=NDJSON, **extra)


def row_counts() -> dict[str, int]:
    return {
        "suites": Suite.objects.count(),
        "runs": Run.objects.count(),
        "cases": Case.objects.count(),
        "trials": Trial.objects.count(),
        "grades": Grade.objects.count(),
        "labels": Label.objects.count(),
        "keys": IngestKey.objects.count(),
    }


NOTHING = {"suites": 0, "runs": 0, "cases": 0, "trials": 0, "grades": 0, "labels": 0, "keys": 0}


def test_it_stores_a_json_run_with_grades_and_labels(alice):
    trials = [
        trial(
            1,
            attempt=1,
            model="m-1",
            input_tokens=10,
            output_tokens=5,
            latency_ms=12.5,
            cost_usd="0.0001",
            created_at="2025-02-24T23:30:00+08:00",
            tags=["geo"],
            labels=[
                {"reviewer": "dana", "verdict": "fail", "critique": "wrong city"},
                {"reviewer": "eve", "verdict": "pass"},
            ],
            extra={"trace": "t-1"},
        ),
        trial(1, attempt=2, passed=True, expected="Paris", input="question 1"),
        trial(2, scores={"faithfulness": 0.8, "relevance": 0.4}, passed=None),
    ]
    trials[2].pop("passed")
    trials[1].pop("expected")
    body = header(
        model="gpt-x",
        source_version="abc123",
        threshold=0.5,
        suite_kind="capability",
        trials=trials,
    )
    resp = post_json(client_for(alice), body)
    assert resp.status_code == 201, resp.content
    data = resp.json()
    run = Run.objects.get(uuid=data["run"])
    assert data["name"] == "r1" and data["suite"] == str(run.suite.uuid)
    assert data["suite_name"] == "ingest-suite" and data["status"] == "succeeded"
    # c1 twice, c2 once: what the source recorded is its plan, not partial
    assert data["status_shown"] == {
        "key": "imported",
        "label": "imported",
        "problems": [],
        "errored": 0,
        "partial": False,
    }
    assert data["counts"] == {"cases": 2, "trials": 3, "grades": 4, "labels": 2}
    assert data["url"] == f"http://testserver/api/runs/{run.uuid}/"
    assert data["page"] == f"http://testserver/runs/{run.uuid}/"
    assert (run.source, run.model, run.source_version, run.status) == (
        "imported",
        "gpt-x",
        "abc123",
        "succeeded",
    )
    assert run.suite.kind == "capability" and run.started_by == alice
    # c1 twice, c2 once: the 3 recorded are the plan, not partial (evals.run_status).
    assert (run.trials_finished, run.trials_total, run.trials_per_case) == (3, 3, 2)
    first = Trial.objects.get(run=run, case__key="c1", attempt=1)
    assert first.output == "answer 1" and first.cost_usd is not None
    assert first.created_at.isoformat() == "2025-02-24T15:30:00+00:00"
    assert first.raw_response["extra"] == {"trace": "t-1"}
    assert first.raw_response["model"] == "m-1"
    labels = {lab.reviewer_name: lab for lab in Label.objects.filter(trial=first)}
    assert set(labels) == {"dana", "eve"}
    assert (labels["dana"].verdict, labels["dana"].critique, labels["dana"].source) == (
        "fail",
        "wrong city",
        "import",
    )
    assert labels["dana"].reviewer is None and labels["eve"].critique == ""
    c2 = dict(Grade.objects.filter(trial__case__key="c2").values_list("grader", "passed"))
    assert c2 == {"faithfulness": True, "relevance": False}
    assert Case.objects.get(key="c1").tags == ["geo"]


@pytest.mark.parametrize("media", [NDJSON, "application/jsonl"])
def test_it_streams_an_ndjson_run_line_by_line(carol, media):
    text = ndjson(header(), [trial(i) for i in range(1, 6)])
    resp = client_for(carol).post(URL, data=text.encode(), content_type=media)
    assert resp.status_code == 201, resp.content
    assert resp.json()["counts"] == {"cases": 5, "trials": 5, "grades": 5, "labels": 0}
    run = Run.objects.get(uuid=resp.json()["run"])
    assert run.target["format"] == "ingest-ndjson"
    assert sorted(Trial.objects.filter(run=run).values_list("case__key", flat=True)) == [
        "c1",
        "c2",
        "c3",
        "c4",
        "c5",
    ]


def test_it_reads_a_crlf_ndjson_body_with_a_bom_and_blank_lines(carol):
    text = ndjson(header(), [trial(1), trial(2)]).replace("\n", "\r\n")
    body = b"\xef\xbb\xbf" + text.encode() + b"\r\n\r\n"
    resp = client_for(carol).post(URL, data=body, content_type=NDJSON)
    assert resp.status_code == 201, resp.content
    assert resp.json()["counts"]["trials"] == 2


def test_the_run_report_holds_the_ingested_figures(carol, bob):
    trials = [trial(i, passed=i <= 3) for i in range(1, 5)]
    trials.append({"case_id": "c5", "input": "q", "output": "", "judge_status": "timeout"})
    resp = post_json(client_for(carol), header(trials=trials))
    assert resp.status_code == 201
    report = client_for(bob).get(resp.json()["url"]).json()["report"]
    overall = report["overall"]
    assert (overall["trials_passed"], overall["trials_graded"]) == (3, 4)
    assert overall["grades_errored"] == 1
    assert report["n_cases"] == 5


C1_LINES = [
    '{"case_id":"c1","score":0.9}',
    '{"case_id":"c2","score":0.6}',
    None,
    '{"case_id":"c4","score":0.75}',
    '{"case_id":"c5","score":1.0}',
]


def _c1_lines(c3: str) -> list[str]:
    lines = [line or c3 for line in C1_LINES]
    return [line.replace('{"case_id"', '{"input":"q","case_id"') for line in lines]


@pytest.mark.parametrize(
    "c3",
    [
        '{"case_id":"c3","score":"NaN"}',
        '{"case_id":"c3","score":NaN}',
        '{"case_id":"c3","score":Infinity}',
    ],
)
@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_a_nan_score_is_not_scored_never_a_fail_c1(carol, bob, c3, fmt):
    lines = _c1_lines(c3)
    head = header(threshold=0.7)
    if fmt == "json":
        body = json.dumps(head)[:-1] + ',"trials":[' + ",".join(lines) + "]}"
        resp = client_for(carol).post(URL, data=body.encode(), content_type="application/json")
    else:
        resp = post_ndjson(client_for(carol), "\n".join([json.dumps(head), *lines]) + "\n")
    assert resp.status_code == 201, resp.content
    grade = Grade.objects.get(trial__case__key="c3")
    assert (grade.status, grade.passed, grade.score, grade.reason) == (
        "error",
        None,
        None,
        "not scored",
    )
    assert Grade.objects.filter(score=0).count() == 0
    raw = client_for(bob).get(resp.json()["url"]).content.decode()
    assert "NaN" not in raw and "Infinity" not in raw
    report = json.loads(raw)["report"]
    (grader,) = report["graders"]
    assert grader["key"] == "imported"
    assert grader["score_mean"] == 0.8125  # (0.9 + 0.6 + 0.75 + 1.0) / 4
    assert (grader["scored"], grader["not_scored"]) == (4, 1)
    for figures in (grader, report["overall"]):
        assert (figures["trials_passed"], figures["trials_graded"]) == (3, 4)  # not 3/5
        assert figures["grades_errored"] == 1
        assert figures["pass_rate"]["mean"] == 0.75


@pytest.mark.parametrize(
    "line,field",
    [
        ('{"case_id":"c1","input":"q","passed":true,"latency_ms":NaN}', "latency_ms"),
        ('{"case_id":"c1","input":"q","passed":"false"}', "passed"),
        ('{"case_id":"c1","input":"q","attempt":"1"}', "attempt"),
        ('{"case_id":"c1","input":"q","socre":0.5}', "socre"),
        (
            '{"case_id":"c1","input":"q","labels":[{"reviewer":"x","verdict":"Pass"}]}',
            "labels[0].verdict",
        ),
        ('{"case_id":"c1","input":"q","score":0.5}', "score"),  # no threshold
    ],
)
def test_it_refuses_a_bad_field_naming_line_and_field(carol, line, field):
    resp = post_ndjson(client_for(carol), json.dumps(header()) + "\n" + line + "\n")
    assert resp.status_code == 400
    data = resp.json()
    assert (data["record"], data["field"]) == (2, field)
    assert data["detail"].startswith(f"line 2: field {field}: ")
    assert row_counts() == NOTHING


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"grader": "g" * 201}, "grader"),
        ({"input_tokens": 2**31}, "input_tokens"),
        ({"attempt": 2**31}, "attempt"),
        ({"cost_usd": "1000000"}, "cost_usd"),
        ({"output": "a\u0000b"}, "output"),
        ({"output": "lone \ud800 surrogate"}, "output"),
        ({"input": {"k": "a\u0000"}}, "input"),
        ({"extra": {"k": "a\u0000b"}}, "extra"),
        ({"labels": [{"reviewer": "x\u0000", "verdict": "pass"}]}, "labels"),
        ({"expected": "OVERFLOW"}, "expected"),
        ({"extra": {"big": "OVERFLOW"}}, "extra"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_values_the_database_cannot_hold_are_a_400_never_a_500(carol, changes, field, fmt):
    rec = {**trial(1), **changes}
    client = client_for(carol)
    if fmt == "json":  # "OVERFLOW" stands for 1e400, which JSON reads as infinity
        body = json.dumps(header(trials=[rec])).replace('"OVERFLOW"', "1e400")
        resp = client.post(URL, data=body.encode(), content_type="application/json")
    else:
        resp = post_ndjson(client, ndjson(header(), [rec]).replace('"OVERFLOW"', "1e400"))
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field
    assert row_counts() == NOTHING


@pytest.mark.parametrize(
    "changes,field",
    [({"output": "lone \ud800 surrogate"}, "output"), ({"extra": {"k": "\udc00"}}, "extra")],
)
def test_a_lone_surrogate_in_a_json_body_whose_records_are_measured_is_a_400(
    carol, settings, changes, field
):
    # A body larger than the record limit has each record measured (its compact UTF-8
    # size), which a lone surrogate cannot be encoded in: still the field's 400, never a 500.
    _limits(settings, INGEST_MAX_RECORD_BYTES=1000)
    body = header(trials=[trial(i) for i in range(30)] + [{**trial(99), **changes}])
    assert len(json.dumps(body)) > 1000
    resp = post_json(client_for(carol), body)
    assert resp.status_code == 400, resp.content
    assert (resp.json()["record"], resp.json()["field"]) == (30, field)
    assert row_counts() == NOTHING


def test_a_cost_is_stored_to_a_trillionth_of_a_dollar(carol):
    resp = post_json(
        client_for(carol),
        header(
            trials=[
                trial(1, cost_usd=0.1 + 0.2),
                trial(2, cost_usd="0.000000015"),
                trial(3, cost_usd="0.0000000000015"),
            ]
        ),
    )
    assert resp.status_code == 201
    costs = dict(Trial.objects.values_list("case__key", "cost_usd"))
    assert costs == {
        "c1": Decimal("0.300000000000"),
        "c2": Decimal("0.000000015000"),  # it was stored as 0.00000002
        "c3": Decimal("0.000000000002"),  # rounded half up
    }


def test_a_known_cost_that_would_be_stored_as_zero_is_refused(carol):
    resp = post_json(client_for(carol), header(trials=[trial(1, cost_usd="4e-13")]))
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == "cost_usd"
    assert resp.json()["detail"] == (
        "trials[0]: field cost_usd: a known cost of 0.0000000000004 USD would be stored as 0 "
        "(which means free): costs are stored to 0.000000000001 USD; give 0 or leave the "
        "cost empty (unknown)"
    )
    assert row_counts() == NOTHING


@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_json_nested_too_deeply_is_a_400(carol, fmt):
    deep = "[" * 50_000 + "]" * 50_000  # under the 100,000 containers a record may hold
    if fmt == "json":
        body = json.dumps(header(trials=[trial(1)]))[:-1] + ', "x": ' + deep + "}"
        resp = client_for(carol).post(URL, data=body.encode(), content_type="application/json")
    else:
        text = json.dumps(header()) + '\n{"case_id": "c1", "extra": {"d": ' + deep + "}}\n"
        resp = post_ndjson(client_for(carol), text)
    assert resp.status_code == 400
    assert "nested too deeply" in resp.json()["detail"]


def test_a_header_name_with_a_nul_is_a_400(carol):
    resp = post_json(client_for(carol), header(run="r\u0000", trials=[trial(1)]))
    assert resp.status_code == 400 and resp.json()["field"] == "run"


def test_it_refuses_an_unknown_header_field_and_a_duplicate_attempt(carol):
    resp = post_json(client_for(carol), {**header(trials=[trial(1)]), "sweet": 1})
    assert resp.status_code == 400
    assert (resp.json()["record"], resp.json()["field"]) == (None, "sweet")
    resp = post_json(client_for(carol), header(trials=[trial(1), trial(1)]))
    assert resp.status_code == 400
    assert (resp.json()["record"], resp.json()["field"]) == (1, "attempt")
    assert "already given on trials[0]" in resp.json()["detail"]
    assert row_counts() == NOTHING


@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_a_bad_record_halfway_leaves_nothing_behind(carol, fmt, monkeypatch):
    monkeypatch.setattr(
        ingest_submit_module, "BATCH_SIZE", 1000
    )  # the first batch is written, then undone
    records = [
        trial(i, output="x" * 300, labels=[{"reviewer": "r", "verdict": "pass"}])
        for i in range(3000)
    ]
    records[1500]["passed"] = "true"
    client = client_for(carol)
    monkeypatch.setitem(bounds.BODY_MAX_BYTES, "ingest_json", 4 * bounds.MIB)  # 1.3 MB here
    if fmt == "json":
        resp = post_json(client, header(trials=records), HTTP_IDEMPOTENCY_KEY="k-half")
        expected_record = 1500
    else:
        resp = post_ndjson(client, ndjson(header(), records), HTTP_IDEMPOTENCY_KEY="k-half")
        expected_record = 1502  # header on line 1, trial index i on line i + 2
    assert resp.status_code == 400
    assert (resp.json()["record"], resp.json()["field"]) == (expected_record, "passed")
    assert row_counts() == NOTHING  # the batch of 1,000 written was rolled back
    records[1500]["passed"] = True  # fixed: the same key is free again
    resp = post_json(client, header(trials=records), HTTP_IDEMPOTENCY_KEY="k-half")
    assert resp.status_code == 201
    assert resp.json()["counts"] == {"cases": 3000, "trials": 3000, "grades": 3000, "labels": 3000}


def test_a_repeat_with_the_same_key_returns_the_first_response_and_writes_nothing(carol):
    client = client_for(carol)
    body = header(trials=[trial(1), trial(2)])
    first = post_json(client, body, HTTP_IDEMPOTENCY_KEY="ci-build-42")
    assert first.status_code == 201
    before = row_counts()
    again = post_json(client, body, HTTP_IDEMPOTENCY_KEY="ci-build-42")
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert row_counts() == before
    stored = IngestKey.objects.get(key="ci-build-42")
    assert stored.user == carol and stored.run.uuid.hex == first.json()["run"].replace("-", "")
    assert stored.body_sha256 == hashlib.sha256(json.dumps(body).encode()).hexdigest()


def test_a_run_key_in_the_ndjson_header_makes_a_repeat_a_no_op(carol, alice):
    text = ndjson(header(run_key="nightly-2026-11-30"), [trial(1)])
    first = post_ndjson(client_for(carol), text)
    again = post_ndjson(client_for(alice), text)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert Run.objects.count() == Trial.objects.count() == 1


def test_a_key_reused_with_another_body_is_a_409_naming_the_key(carol):
    client = client_for(carol)
    assert (
        post_json(client, header(trials=[trial(1)]), HTTP_IDEMPOTENCY_KEY="k1").status_code == 201
    )
    before = row_counts()
    resp = post_json(client, header(run="r2", trials=[trial(1)]), HTTP_IDEMPOTENCY_KEY="k1")
    assert resp.status_code == 409
    assert resp.json()["key"] == "k1" and "'k1'" in resp.json()["detail"]
    assert resp.json()["field"] == "Idempotency-Key"
    assert row_counts() == before


def test_a_run_key_and_a_different_header_key_are_refused(carol):
    resp = post_json(
        client_for(carol), header(run_key="a", trials=[trial(1)]), HTTP_IDEMPOTENCY_KEY="b"
    )
    assert resp.status_code == 400 and resp.json()["field"] == "run_key"


def test_a_repeat_without_a_key_is_refused_not_doubled(carol):
    client = client_for(carol)
    body = header(trials=[trial(1)])
    assert post_json(client, body).status_code == 201
    resp = post_json(client, body)
    assert resp.status_code == 400 and resp.json()["field"] == "run"
    assert Trial.objects.count() == 1


def test_a_key_claimed_by_a_concurrent_request_is_replayed_not_written(carol, monkeypatch):
    """The unique key is the guard: with the pre-check blinded (as when two requests race
    past it), the second request's insert fails and it replays the committed response."""
    client = client_for(carol)
    body = header(trials=[trial(1)])
    first = post_json(client, body, HTTP_IDEMPOTENCY_KEY="race")
    real_filter = IngestKey.objects.filter

    class Blind:
        def exists(self):
            return False

    monkeypatch.setattr(
        IngestKey.objects,
        "filter",
        lambda **kw: Blind() if kw == {"key": "race"} else real_filter(**kw),
    )
    again = post_json(client, body, HTTP_IDEMPOTENCY_KEY="race")
    assert again.status_code == 201 and again.json() == first.json()
    assert Run.objects.count() == 1 and Trial.objects.count() == 1


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="two writers at once need PostgreSQL (SQLite serialises them)",
)
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_concurrent_requests_with_one_key_write_once(carol):
    text = ndjson(header(), [trial(i) for i in range(2000)])
    results, barrier = [], threading.Barrier(2)

    def post() -> None:
        client = client_for(carol)
        barrier.wait()
        try:
            results.append(post_ndjson(client, text, HTTP_IDEMPOTENCY_KEY="same"))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in results) == [201, 201]
    assert results[0].json() == results[1].json()
    assert Run.objects.count() == 1 and Trial.objects.count() == 2000
    assert IngestKey.objects.count() == 1


def _limits(settings, **limits):
    settings.ASSAY = {**settings.ASSAY, **limits}


def test_a_body_over_the_limit_is_a_413(carol, settings):
    _limits(settings, INGEST_MAX_BYTES=2000)
    body = header(trials=[trial(i) for i in range(40)])
    resp = post_json(client_for(carol), body)
    assert resp.status_code == 413
    assert resp.json()["limit"] == 2000 and "2,000 bytes" in resp.json()["detail"]
    assert row_counts() == NOTHING


def test_a_body_growing_past_the_limit_while_read_is_a_413(carol, settings, monkeypatch):
    _limits(settings, INGEST_MAX_BYTES=2000)
    text = ndjson(header(), [trial(i) for i in range(40)])
    # A lying Content-Length is cut by the server; here the stream is the source of truth.
    monkeypatch.setattr(ingest_sources._Body, "__init__", _lenient_body_init)
    resp = post_ndjson(client_for(carol), text, HTTP_IDEMPOTENCY_KEY="grow")
    assert resp.status_code == 413
    assert row_counts() == NOTHING


def _lenient_body_init(self, stream, *, max_bytes):
    self._stream, self.max_bytes, self.size = stream, max_bytes, 0
    self._hash = hashlib.sha256()


@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_a_record_one_byte_over_the_limit_is_a_413_naming_it(carol, settings, fmt):
    limit = 1000
    _limits(settings, INGEST_MAX_RECORD_BYTES=limit)
    ok = trial(1, output="")
    big = trial(2, output="")
    big["output"] = "y" * (limit + 1 - len(json.dumps(big, separators=(",", ":"))))
    assert len(json.dumps(big, separators=(",", ":"))) == limit + 1
    exact = trial(3, output="")
    exact["output"] = "z" * (limit - len(json.dumps(exact, separators=(",", ":"))))
    client = client_for(carol)
    if fmt == "json":
        resp = post_json(client, header(trials=[ok, exact, big]))
        where, record = "trials[2]", 2
    else:
        text = (
            "\n".join(json.dumps(r, separators=(",", ":")) for r in [header(), ok, exact, big])
            + "\n"
        )
        resp = post_ndjson(client, text)
        where, record = "line 4", 4
    assert resp.status_code == 413
    data = resp.json()
    assert (data["record"], data["limit"]) == (record, limit)
    assert data["detail"].startswith(f"{where}: the record is ")
    assert "1,000 bytes" in data["detail"]
    assert row_counts() == NOTHING


def test_a_big_valid_ingest_is_not_refused_by_djangos_upload_limit(carol, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    text = ndjson(header(), [trial(i, output="o" * 200) for i in range(50)])
    assert len(text) > 10 * 1024
    resp = post_ndjson(client_for(carol), text)
    assert resp.status_code == 201 and resp.json()["counts"]["trials"] == 50


@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded"])
def test_it_refuses_other_content_types(carol, media):
    resp = client_for(carol).post(URL, data=b"{}", content_type=media)
    assert resp.status_code == 415


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"{not json",
        b'{"suite":"s","run":"r"}',
        b'{"suite":"s","run":"r","trials":[]}',
        b'{"suite":"s","run":"r","trials":[1]}',
    ],
)
def test_it_refuses_empty_or_malformed_json_bodies_with_a_400(carol, body):
    resp = client_for(carol).post(URL, data=body, content_type="application/json")
    assert resp.status_code in (400, 411)
    assert set(resp.json()) >= {"detail", "record", "field"}
    assert row_counts() == NOTHING


def test_it_refuses_a_suite_kind_that_differs_from_the_existing_suite(carol):
    Suite.objects.create(name="ingest-suite", kind="regression")
    resp = post_json(client_for(carol), header(suite_kind="capability", trials=[trial(1)]))
    assert resp.status_code == 400 and resp.json()["field"] == "suite_kind"


@pytest.mark.parametrize(
    "user,status", [("alice", 201), ("carol", 201), ("bob", 403), ("mallory", 403), (None, 401)]
)
def test_only_engineers_and_leads_may_ingest(db, request, user, status):
    who = request.getfixturevalue(user) if user else None
    resp = post_json(client_for(who), header(trials=[trial(1)]))
    assert resp.status_code == status
    assert Run.objects.count() == (1 if status == 201 else 0)


def test_the_schema_documents_the_ingest_endpoint(alice):
    resp = client_for(alice).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert resp.status_code == 200
    text = resp.content.decode()
    assert "/api/ingest" in text and "application/x-ndjson" in text
    assert "Idempotency-Key" in text


def test_it_refuses_a_key_twice_in_a_plain_record_naming_its_line(carol):
    # A record orjson reads (no NaN, no escapes): the duplicate is still seen.
    text = ndjson(
        header(), [trial(1)], raw_lines=['{"case_id": "c2", "passed": true, "passed": false}']
    )
    resp = post_ndjson(client_for(carol), text)
    assert resp.status_code == 400, resp.content
    assert resp.json()["record"] == 3
    assert "key 'passed' appears twice" in resp.json()["detail"]
    assert row_counts() == NOTHING


def test_it_counts_a_lone_cr_as_a_line_break_in_the_lines_it_names(carol):
    # Line 2 holds a lone CR: two lines for the reader, so the bad record is line 5, not 4.
    text = json.dumps(header()) + "\n" + json.dumps(trial(1)) + "\r" + json.dumps(trial(2))
    text += "\n" + json.dumps(trial(3)) + "\n" + json.dumps(trial(4, attempt=0)) + "\n"
    resp = post_ndjson(client_for(carol), text)
    assert resp.status_code == 400, resp.content
    assert resp.json()["record"] == 5
    assert resp.json()["detail"].startswith("line 5: field attempt:")


def test_it_keeps_an_integer_past_64_bits_in_extra_as_an_integer(carol):
    big = 2**70
    text = ndjson(header(), [trial(1, extra={"big": big, "small": 7})])
    resp = post_ndjson(client_for(carol), text)
    assert resp.status_code == 201, resp.content
    raw = Trial.objects.get().raw_response["extra"]
    assert raw == {"big": big, "small": 7}
    assert type(raw["big"]) is int


def test_a_record_of_a_million_empty_objects_is_refused_before_it_is_parsed(carol):
    # A 4 MiB line of [{},{},...] parsed into a million dicts took ~150-200 MB of memory.
    before = row_counts()
    hostile = trial(1, output="")
    hostile["input"] = "__X__"
    line = json.dumps(hostile).replace('"__X__"', "[" + ",".join(["{}"] * 100_001) + "]")
    resp = post_ndjson(client_for(carol), json.dumps(header()) + "\n" + line + "\n")
    assert resp.status_code == 413
    assert resp.json()["record"] == 2
    assert "more than 100,000 JSON objects and arrays" in resp.json()["detail"]
    assert row_counts() == before
