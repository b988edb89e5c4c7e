"""The project starts as a server does: a fresh interpreter runs ``manage.py check``, which
loads the URL configuration first (``config.urls`` -> the API router -> every app's views).
A circular import that the test session's import order hides fails here."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import PROJECT_DIR


def test_manage_py_check_passes_in_a_fresh_interpreter():
    # As a server starts: no test registries (they import half the project first and hide
    # the order a plain start takes), the production settings module.
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_REGISTRIES"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="true")
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=25,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "System check identified no issues" in done.stdout
