"""The project's shared mock endpoint (``../shared/tools/mockllm/server.py``) for tests.

``mockllm_start(*args)`` runs it on a free local port in its own process group and returns a
``MockServer`` (``base_url`` ends in ``/v1``; ``stats()`` reads ``/admin/stats``: its
``requests`` counts every chat call it received); ``stop()`` ends that process (only it).
The ``mockllm`` fixture is a factory whose servers are stopped at the end of the test. The
test is skipped when the mock is absent, and fails instead under ``CI=true``.
Set ``ASSAY_MOCKLLM`` to use another copy.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.conftest import PROJECT_DIR

MOCKLLM = Path(
    os.environ.get(
        "ASSAY_MOCKLLM", PROJECT_DIR.parent / "shared" / "tools" / "mockllm" / "server.py"
    )
)
# The mock's default ``--seed``: the tests start it with no other.
MOCK_SEED = 1234


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class MockServer:
    process: subprocess.Popen
    port: int

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def stats(self) -> dict:
        """``/admin/stats``: ``requests`` (chat calls received), ``outcomes``, ``inflight``."""
        return httpx.get(f"{self.root}/admin/stats", timeout=5).json()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def _mock_absent() -> None:
    if not MOCKLLM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared mock missing under CI: {MOCKLLM}")
        pytest.skip(f"shared mock not found: {MOCKLLM}")


def mock_module() -> ModuleType:
    """The mock's ``server.py`` imported as a module (its ``expected_outcome``, ``MARKER_RE``)."""
    _mock_absent()
    name = "assay_mockllm_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, MOCKLLM)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def mock_passes_predicted(inputs: Iterable[str], trials: int) -> int:
    """Passes the mock (seed ``MOCK_SEED``) gives ``trials`` answered calls of each input, by
    its own ``expected_outcome`` over the input's marker ``[case=K p=P ...]``; an input
    without a marker or ``p`` fails the test."""
    server = mock_module()
    total = 0
    for text in inputs:
        match = server.MARKER_RE.search(text)
        assert match and match.group(2), f"no marker with p in {text!r}"
        case, p = match.group(1), float(match.group(2))
        total += sum(server.expected_outcome(MOCK_SEED, case, n, p) for n in range(trials))
    return total


def mockllm_start(*args: str) -> MockServer:
    """Start the mock with ``args`` (e.g. ``--mode judge --latency-ms 100``); waits (10 s at
    most) until it answers ``/health``."""
    if not MOCKLLM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared mock missing under CI: {MOCKLLM}")
        pytest.skip(f"shared mock not found: {MOCKLLM}")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(MOCKLLM), "--port", str(port), "--no-uvloop", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    server = MockServer(process=process, port=port)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{server.root}/health", timeout=1).raise_for_status()
            return server
        except httpx.HTTPError:
            if process.poll() is not None:
                break
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"the mock at {MOCKLLM} did not start")


@pytest.fixture
def mockllm():
    """A factory: ``mockllm("--mode", "judge")`` -> a started ``MockServer``; all stopped at
    the end of the test."""
    started: list[MockServer] = []

    def start(*args: str) -> MockServer:
        server = mockllm_start(*args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
