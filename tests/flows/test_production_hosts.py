"""A production server (DEBUG off) answers for its configured host names and refuses to
start without any (``config.hosts``): before, it started and answered every request 400."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from config.hosts import hosts_required

ROOT = Path(__file__).resolve().parents[2]

# Loads the WSGI entry point as gunicorn does (it stops at the host check, before the URL
# conf is imported).
SERVE = "import config.wsgi"


def _serve(tmp_path: Path):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ALLOWED_HOSTS", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        DEBUG="false",
        SECRET_KEY="production-hosts-test-" + "x" * 40,
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3",
        ASSAY_VAR_DIR=str(tmp_path),
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-c", SERVE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=25,
    )


def test_it_refuses_to_start_without_host_names_when_debug_is_off(tmp_path):
    done = _serve(tmp_path)
    assert done.returncode != 0
    assert "ImproperlyConfigured: ALLOWED_HOSTS must be set when DEBUG is false" in done.stderr


def test_the_check_passes_with_host_names_or_with_debug_on():
    with override_settings(DEBUG=False, ALLOWED_HOSTS=[]), pytest.raises(ImproperlyConfigured):
        hosts_required()
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["assay.example.com"]):
        hosts_required()
    with override_settings(DEBUG=True, ALLOWED_HOSTS=[]):
        hosts_required()


def test_it_answers_its_configured_host_and_refuses_others(client):
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["assay.example.com"]):
        assert client.get("/healthz", HTTP_HOST="assay.example.com:8443").status_code == 200
        assert client.get("/healthz", HTTP_HOST="127.0.0.1:8630").status_code == 400
