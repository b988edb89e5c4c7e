"""Request bodies are refused over their endpoint's limit before they are parsed
(``core.bounds.BODY_MAX_BYTES``, ``core.api.parsers``), and a body at its limit parses
under the per-request memory ceiling (``REQUEST_PEAK_MAX_BYTES``)."""

from __future__ import annotations

import io
import json
import tracemalloc

import httpx
import pytest

from apitokens.tokens import token_create
from core import bounds
from core.api.parsers import body_read_capped
from core.errors import DomainError
from tests.core.test_api_core import client_for


def post_measured(client, path: str, body: bytes):
    """The response to ``body`` posted as JSON to ``path`` and the peak of Python allocations
    while it was served, in bytes (the test client's own copies of the body included: about
    twice its size). A small post first, so that loading code is not counted."""
    client.post(path, b"{}", content_type="application/json")
    tracemalloc.start()
    try:
        response = client.post(path, body, content_type="application/json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return response, peak


def worst_body(size: int) -> bytes:
    """A JSON array of empty objects of about ``size`` bytes: the most memory a byte can ask
    of the parser (a dict and its pair list for every 3 bytes)."""
    return b"[" + b",".join([b"{}"] * ((size - 2) // 3)) + b"]"


def test_it_refuses_a_large_labels_body_before_parsing_it(bob):
    body = worst_body(2 * bounds.MIB)  # parsed: about 90 MB
    response, peak = post_measured(client_for(bob), "/api/labels", body)
    assert response.status_code == 413
    assert response.json()["limit"] == bounds.BODY_MAX_BYTES["labels"]
    assert "this endpoint's limit of 262,144 bytes" in response.json()["detail"]
    assert not response.wsgi_request._read_started  # never read, so never parsed
    assert peak < 8 * bounds.MIB


def test_it_refuses_a_large_run_start_body_naming_the_limit(carol):
    body = json.dumps({"suite": "s", "target": {"kind": "simulated", "pad": "x" * 300_000}})
    response = client_for(carol).post(
        "/api/runs/start", body.encode(), content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json()["limit"] == 256 * 1024
    assert not response.wsgi_request._read_started


def test_a_body_at_its_limit_parses_under_the_memory_ceiling(bob):
    limit = bounds.BODY_MAX_BYTES["gate"]
    body = worst_body(limit)
    assert len(body) <= limit
    response, peak = post_measured(client_for(bob), "/api/gate", body)
    assert response.status_code == 400  # parsed, then refused by the serializer
    assert peak < bounds.REQUEST_PEAK_MAX_BYTES


def test_a_stream_running_past_the_limit_is_refused_without_a_content_length():
    with pytest.raises(DomainError) as caught:
        body_read_capped(io.BytesIO(b"x" * 101), content_length=None, limit=100)
    assert caught.value.code == "too_large"
    assert caught.value.extra["limit"] == 100
    assert body_read_capped(io.BytesIO(b"x" * 100), content_length=None, limit=100) == b"x" * 100


def test_a_large_json_ingest_body_is_refused_before_reading_saying_to_use_ndjson(carol):
    trials = [{f"k{i}": i for i in range(200_000)}]  # many small keys: 2.6 MB, 40 MB parsed
    body = json.dumps({"suite": "s", "run": "r", "trials": trials}).encode()
    response, peak = post_measured(client_for(carol), "/api/ingest", body)
    assert response.status_code == 413
    assert "NDJSON" in response.json()["detail"]
    assert response.json()["limit"] == bounds.BODY_MAX_BYTES["ingest_json"]
    assert not response.wsgi_request._read_started
    assert peak < 8 * bounds.MIB


@pytest.mark.parametrize("path", ["/api/runs/start", "/api/labels/", "/api/baselines/"])
def test_a_chunked_body_without_a_length_is_a_411_not_an_empty_request(carol, path):
    client = client_for(carol)
    body = json.dumps({"suite": "x"}).encode()
    # What a WSGI server hands Django for a chunked body: the header, and no CONTENT_LENGTH.
    response = client.post(
        path,
        body,
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        CONTENT_LENGTH="",
    )
    assert response.status_code == 411, response.content
    assert response.json()["detail"].startswith("Content-Length is required")
    # the same body with its length reaches the view (and is answered about its content)
    assert client.post(path, body, content_type="application/json").status_code != 411


def test_an_anonymous_chunked_body_is_a_401_first():
    response = client_for(None).post(
        "/api/runs/start",
        b"{}",
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        CONTENT_LENGTH="",
    )
    assert response.status_code in (401, 403)


# The live server needs a transactional database; serialized rollback keeps the content types
# the later transactional tests of this process load (else they collide).
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_chunked_start_through_a_real_wsgi_server_is_a_411(carol, live_server):
    """httpx sends a generator body in chunks; the development server (what ``make demo``
    runs) passes no CONTENT_LENGTH, so the body would have been read as empty."""
    _, secret = token_create(user=carol, name="chunked")

    def chunks():
        yield b'{"suite": '
        yield b'"nope"}'

    response = httpx.post(
        f"{live_server.url}/api/runs/start",
        content=chunks(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 411, response.text
    assert response.json()["detail"].startswith("Content-Length is required")
