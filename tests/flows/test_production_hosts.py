"""A production server (DEBUG off) answers for its configured host names and refuses to
start without any (``config.hosts``): before, it started and answered every request 400."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Loads the WSGI entry point as gunicorn does, then sends it requests for /healthz (no
# database needed) and prints each status. Static files are served unhashed: production runs
# ``collectstatic`` first, and the 400 page names its hashed files from that manifest.
SERVE = r"""
import io, json, sys
from django.conf import settings
settings.STORAGES = {**settings.STORAGES, "staticfiles": {
    "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
from config.wsgi import application

def status(host):
    out = {}
    def start_response(code, headers, exc_info=None):
        out["status"] = int(code.split()[0])
    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "QUERY_STRING": "",
        "SERVER_NAME": "localhost", "SERVER_PORT": "8443", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": host, "HTTP_X_FORWARDED_PROTO": "https", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""), "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
        "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
    }
    b"".join(application(environ, start_response))
    return out["status"]

print(json.dumps({h: status(h) for h in sys.argv[1:]}))
"""


def _serve(tmp_path: Path, hosts: str | None, *request_hosts: str):
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
    if hosts is not None:
        env["ALLOWED_HOSTS"] = hosts
    return subprocess.run(
        [sys.executable, "-c", SERVE, *request_hosts],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=25,
    )


def test_it_refuses_to_start_without_host_names_when_debug_is_off(tmp_path):
    done = _serve(tmp_path, None, "127.0.0.1")
    assert done.returncode != 0
    assert "ImproperlyConfigured: ALLOWED_HOSTS must be set when DEBUG is false" in done.stderr


def test_it_answers_its_configured_host_and_refuses_others(tmp_path):
    done = _serve(tmp_path, "assay.example.com", "assay.example.com:8443", "127.0.0.1:8630")
    assert done.returncode == 0, done.stderr
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    assert statuses == {"assay.example.com:8443": 200, "127.0.0.1:8630": 400}
