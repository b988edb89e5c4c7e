"""A live Assay server for the client's tests: waitress in a thread over the test database
(as tests/flows/test_api_schemathesis.py), and a bearer token of carol (engineer)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from waitress.server import create_server

from apitokens.tokens import token_create
from config.wsgi import application


@pytest.fixture
def server_url(transactional_db) -> Iterator[str]:
    """Base URL of waitress serving the project from a thread (2 worker threads)."""
    server = create_server(application, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.close()
        server.task_dispatcher.shutdown()
        thread.join(timeout=10)


@pytest.fixture
def token(carol) -> str:
    """A bearer token of carol (engineer: may ingest and gate)."""
    return token_create(user=carol, name="ci")[1]
