"""A fresh database and a real WSGI server for the HTTP benchmarks (label save, API paging).

The server runs the way the README's Production section does: gunicorn with as many sync
workers as cores (fewer CPU-ms a page than gunicorn's ``2 × cores + 1`` here), the
app loaded once before the fork (``--preload``) and persistent database
connections (``DB_CONN_MAX_AGE=60``), DEBUG off. ``BENCH_SERVER=waitress`` serves the same
app from one waitress process (``BENCH_THREADS`` threads, default 8) instead, as the
earlier figures were made; ``BENCH_WORKERS`` sets the number of gunicorn workers and
``BENCH_WORKER_CLASS=gthread`` makes them threaded (``BENCH_THREADS`` each). Cookies are
sent without ``Secure`` (plain HTTP on loopback), through ``bench/_wsgi.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_SERVER", "gunicorn")
WORKERS = int(os.environ.get("BENCH_WORKERS", str(os.cpu_count() or 1)))
THREADS = int(os.environ.get("BENCH_THREADS", "8"))
# gunicorn's worker class: "sync" (the README's), or "gthread" with BENCH_THREADS threads each.
WORKER_CLASS = os.environ.get("BENCH_WORKER_CLASS", "sync")


def bench_env(sqlite_name: str) -> dict[str, str]:
    """The environment of the benchmark and its server: ``DATABASE_URL`` as given, else a
    throwaway SQLite file ``/tmp/<sqlite_name>``; DEBUG off, plain HTTP."""
    env = dict(os.environ)
    env.setdefault("DATABASE_URL", f"sqlite:///{tempfile.gettempdir()}/{sqlite_name}")
    env.setdefault("DB_CONN_MAX_AGE", "60")
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "false",
            "SECURE_HSTS_SECONDS": "0",
        }
    )
    return env


def database_fresh() -> None:
    """Drop and re-create ``DATABASE_URL`` (PostgreSQL) or delete the SQLite file, then set
    Django up and migrate. Call with ``bench_env`` applied to ``os.environ``."""
    url = os.environ["DATABASE_URL"]
    if url.startswith("postgres"):
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
    else:
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def server_start(port: int, env: dict[str, str]) -> subprocess.Popen:
    """Start the server on 127.0.0.1:``port`` (module doc) and wait until ``/healthz``
    answers; raises RuntimeError when it does not within 120 s."""
    if SERVER == "gunicorn":
        cmd = [
            sys.executable,
            "-m",
            "gunicorn",
            "--pythonpath",
            f"{ROOT},{ROOT / 'bench'}",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(WORKERS),
            "--worker-class",
            WORKER_CLASS,
            *(["--threads", str(THREADS)] if WORKER_CLASS == "gthread" else []),
            "--preload",
            "--backlog",
            "2048",
            "--log-level",
            "warning",
            "_wsgi:application",
        ]
    else:
        cmd = [sys.executable, str(ROOT / "bench" / "_wsgi.py"), str(port), str(THREADS)]
    child = subprocess.Popen(cmd, env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return child
        except OSError:
            time.sleep(0.1)
    server_stop(child)
    raise RuntimeError("the server did not answer /healthz within 120 s")


def server_stop(child: subprocess.Popen) -> None:
    """Stop the server started by ``server_start`` (SIGTERM, then SIGKILL after 10 s)."""
    child.terminate()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def server_cpu_seconds(child: subprocess.Popen) -> float:
    """CPU seconds (user + system) used so far by the server process and its children
    (gunicorn's workers), read from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = {child.pid}
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == child.pid:  # the parent pid
            pids.add(int(path.parent.name))
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def server_label() -> str:
    """How the server ran, for the printed figures."""
    if SERVER == "gunicorn" and WORKER_CLASS == "gthread":
        return f"gunicorn, {WORKERS} gthread workers x {THREADS} threads"
    if SERVER == "gunicorn":
        return f"gunicorn, {WORKERS} {WORKER_CLASS} workers"
    return f"waitress, 1 process, {THREADS} threads"
