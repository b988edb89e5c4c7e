"""The client's commands as the separate processes a CI job runs: ``assay-gate`` and a
pytest session of a user's project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROCESS_TIMEOUT_S = 25
OFF = ("django", "hypothesispytest", "schemathesis", "anyio", "cacheprovider")
ASSAY_GATE = Path(sys.executable).parent / "assay-gate"


def client_env(server_url: str, token: str) -> dict[str, str]:
    """The environment of a CI step: the server and token, no Django settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ASSAY_"))}
    return {**env, "ASSAY_URL": server_url, "ASSAY_TOKEN": token}


def assay_gate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``assay-gate ARGS`` as a console script (the installed entry point)."""
    assert ASSAY_GATE.exists(), f"{ASSAY_GATE} is missing: pip install -e clients/python"
    return subprocess.run(
        [str(ASSAY_GATE), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )


def run_pytest(folder: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A separate ``pytest ARGS`` in ``folder``, with the plugins of a plain project: those
    installed by entry point (this client's, pytest-repeat, xdist) but not this project's
    own test plugins (pytest-django, hypothesis, schemathesis, anyio: 4 s of imports)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *(f"-pno:{name}" for name in OFF), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
