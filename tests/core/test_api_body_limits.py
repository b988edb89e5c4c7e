"""Request bodies are refused over their endpoint's limit before they are parsed
(``core.bounds.BODY_MAX_BYTES``, ``core.api.parsers``), and a body at its limit parses
under the per-request memory ceiling (``REQUEST_PEAK_MAX_BYTES``)."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest

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
