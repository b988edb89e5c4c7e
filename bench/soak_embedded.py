"""Soak test of the embedded default: does `make demo`'s stack run for hours?

Starts the stack as `make demo` does (`manage.py demo`: migrate, demo data and runs, then
the dashboard under runserver with a Celery worker and embedded beat on the server-less
filesystem broker), with its own ASSAY_VAR_DIR and SQLite file so it never touches the demo,
and a copy of the shared mock LLM (../shared/tools/mockllm) as the target. Then, every
minute for --minutes, it starts a run through the API (POST /api/runs/start, a bearer
token) and writes one JSON line to --results:

    {"minute", "at", "worker_pids", "worker_alive", "heartbeat_age_s", "web_ok",
     "web_ms" (the slowest API answer of the minute),
     "started": run name or null, "start_error", "runs": {status: count}, "late": [...],
     "mock_requests", "broker_set_aside", "worker_restarts", "demo_alive",
     "banner": whether the dashboard shows its "no worker" banner}

``worker_alive`` is whether a Celery worker process of this stack exists (by /proc, the
worker's environment holding this soak's ASSAY_VAR_DIR); ``late`` names runs started more
than --late-after seconds ago that are not finished. The last line is
``{"summary": {...}}``: minutes, runs started, finished, late, worker deaths seen,
longest silent heartbeat. The stack is stopped at the end (only the processes this script
started). Run it with the project's interpreter from the project folder:

    DEBUG=true python bench/soak_embedded.py --minutes 10 --results bench/soak_shakeout.jsonl

Nothing here is run in CI; figures go to bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx

PROJECT = Path(__file__).resolve().parent.parent
MOCKLLM = PROJECT.parent / "shared" / "tools" / "mockllm" / "server.py"
CASES = 10
TERMINAL = {"succeeded", "failed", "cancelled"}
POLL_SECONDS = 5.0  # how often unfinished runs are read within a minute

SETUP = """
import json
from django.db import transaction
from apitokens.tokens import token_create
from demo.load import demo_user_ensure
from evals.cases import CaseSpec, cases_upsert
from evals.models import Suite
user = demo_user_ensure(username="soak", password="soak-password")
with transaction.atomic():
    suite, _ = Suite.objects.get_or_create(name="soak")
    cases_upsert(suite=suite, specs=[
        CaseSpec(key=f"c{i:02d}", input=f"[case=c{i:02d} p=0.8 expect=ANSWER-c{i:02d}] q{i}",
                 expected=f"ANSWER-c{i:02d}")
        for i in range(%(cases)d)
    ])
_, token = token_create(user=user, name="soak")
print(json.dumps({"suite": str(suite.uuid), "token": token}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _wait_http(url: str, seconds: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[:3]} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{url} did not answer in {seconds} s")


def worker_pids(var_dir: Path) -> list[int]:
    """Pids of Celery worker processes whose environment has ASSAY_VAR_DIR=var_dir."""
    wanted = f"ASSAY_VAR_DIR={var_dir}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if b"celery" not in cmdline or b"worker" not in cmdline:
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return sorted(pids)


def _session(base: str) -> httpx.Client:
    """A signed-in dashboard session of the soak user (the login form, with its CSRF)."""
    browser = httpx.Client(base_url=base, follow_redirects=True, timeout=30)
    page = browser.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    browser.post(
        "/accounts/login/",
        data={"username": "soak", "password": "soak-password", "csrfmiddlewaretoken": token},
        headers={"Referer": str(page.url)},
    )
    return browser


def _banner_shown(browser: httpx.Client) -> bool | None:
    """Whether the run list shows the "no worker" banner; None when it did not answer."""
    try:
        page = browser.get("/runs/")
    except httpx.HTTPError:
        return None
    return 'id="worker-missing"' in page.text if page.status_code == 200 else None


def heartbeat_age(db_path: Path) -> float | None:
    """Seconds since the newest worker heartbeat (core.heartbeat), read-only; None if none."""
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10) as db:
            row = db.execute("SELECT MAX(beat_at) FROM core_workerheartbeat").fetchone()
    except sqlite3.Error:
        return None
    if not row or not row[0]:
        return None
    seen = datetime.fromisoformat(row[0])
    if seen.tzinfo is None:
        seen = seen.replace(tzinfo=UTC)
    return round((datetime.now(UTC) - seen).total_seconds(), 1)


def main() -> int:  # noqa: PLR0915 - one linear script: start, loop, summarise, stop
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--results", type=Path, default=PROJECT / "bench" / "soak_results.jsonl")
    parser.add_argument("--var-dir", type=Path, default=None, help="default: a new temp folder")
    parser.add_argument("--port", type=int, default=0, help="dashboard port (default: free)")
    parser.add_argument("--trials", type=int, default=2, help="trials per case of each run")
    parser.add_argument("--latency-ms", type=int, default=100, help="the mock's latency")
    parser.add_argument("--late-after", type=float, default=120.0)
    parser.add_argument(
        "--kill-worker-at",
        type=int,
        default=None,
        help="SIGKILL the worker at this minute (checks the watchdog and the banner)",
    )
    args = parser.parse_args()

    var_dir = (args.var_dir or Path(tempfile.mkdtemp(prefix="assay-soak-"))).resolve()
    var_dir.mkdir(parents=True, exist_ok=True)
    db_path = var_dir / "soak.sqlite3"
    port = args.port or _free_port()
    mock_port = _free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"REDIS_URL", "DATABASE_URL", "CELERY_TASK_ALWAYS_EAGER"}
    }
    env.update(
        DEBUG="true",
        DJANGO_SETTINGS_MODULE="config.settings",
        ASSAY_VAR_DIR=str(var_dir),
        DATABASE_URL=f"sqlite:///{db_path}",
        OPENAI_API_KEY="soak-not-a-key",
        PYTHONPATH=str(PROJECT),
        PYTHONUNBUFFERED="1",
    )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    results = args.results.open("a", buffering=1)

    def write(record: dict) -> None:
        results.write(json.dumps(record) + "\n")

    started: list[subprocess.Popen] = []

    def start(command: list[str], log_name: str) -> subprocess.Popen:
        log = (var_dir / log_name).open("ab")
        process = subprocess.Popen(
            command,
            cwd=PROJECT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(process)
        return process

    mock = start(
        [
            sys.executable,
            str(MOCKLLM),
            "--port",
            str(mock_port),
            "--latency-ms",
            str(args.latency_ms),
            "--no-uvloop",
        ],
        "mockllm.log",
    )
    _wait_http(f"http://127.0.0.1:{mock_port}/health", 20, mock)
    demo = start(
        [sys.executable, "manage.py", "demo", "--addrport", f"127.0.0.1:{port}", "--trials", "2"],
        "demo.log",
    )
    base = f"http://127.0.0.1:{port}"
    write(
        {
            "start": _now(),
            "var_dir": str(var_dir),
            "port": port,
            "mock_port": mock_port,
            "minutes": args.minutes,
            "python": sys.version.split()[0],
            "demo_pid": demo.pid,
        }
    )
    try:
        _wait_http(f"{base}/login/", 900, demo)
        setup = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SETUP % {"cases": CASES}],
            cwd=PROJECT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        ids = json.loads(setup.stdout.strip().splitlines()[-1])
        client = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {ids['token']}"}, timeout=30
        )
        browser = _session(base)
        target = {
            "kind": "openai",
            "base_url": f"http://127.0.0.1:{mock_port}/v1",
            "model": "mock-model",
            "prompt_template": "$input",
            "concurrency": 4,
        }
        graders = [{"key": "answer", "kind": "regex", "config": {"pattern": "^ANSWER-"}}]
        runs: dict[str, dict] = {}
        deaths = 0
        last_pids: list[int] = []
        longest_silence = 0.0
        t0 = time.monotonic()
        for minute in range(args.minutes):
            name = f"soak-{minute:04d}"
            start_error = None
            if minute == args.kill_worker_at:
                for pid in worker_pids(var_dir):
                    os.kill(pid, signal.SIGKILL)
            try:
                response = client.post(
                    "/api/runs/start",
                    json={
                        "suite": ids["suite"],
                        "name": name,
                        "target": target,
                        "graders": graders,
                        "trials_per_case": args.trials,
                    },
                )
                if response.status_code == 201:
                    runs[name] = {
                        "uuid": response.json()["uuid"],
                        "at": time.monotonic(),
                        "status": "queued",
                    }
                else:
                    start_error = f"{response.status_code} {response.text[:200]}"
            except httpx.HTTPError as error:
                start_error = repr(error)
            # Poll unfinished runs every POLL_SECONDS to the end of the minute, then look.
            web_ok, web_ms = True, []
            while True:
                for run in runs.values():
                    if run["status"] in TERMINAL:
                        continue
                    began = time.monotonic()
                    try:
                        detail = client.get(f"/api/runs/{run['uuid']}/")
                        web_ms.append(round((time.monotonic() - began) * 1000))
                        web_ok = web_ok and detail.status_code == 200
                        if detail.status_code == 200:
                            run["status"] = detail.json()["status"]
                            if run["status"] in TERMINAL:
                                run["finished_after_s"] = round(time.monotonic() - run["at"], 1)
                    except httpx.HTTPError:
                        web_ok = False
                left = t0 + 60 * (minute + 1) - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(POLL_SECONDS, left))
            began = time.monotonic()
            try:  # the web server answers a list too
                web_ok = web_ok and client.get("/api/runs/").status_code == 200
                web_ms.append(round((time.monotonic() - began) * 1000))
            except httpx.HTTPError:
                web_ok = False
            web_ms = max(web_ms) if web_ms else None
            pids = worker_pids(var_dir)
            if last_pids and not set(last_pids) & set(pids):
                deaths += 1
            last_pids = pids
            age = heartbeat_age(db_path)
            if age is not None:
                longest_silence = max(longest_silence, age)
            try:
                mock_requests = (
                    httpx.get(f"http://127.0.0.1:{mock_port}/admin/stats", timeout=5)
                    .json()
                    .get("requests")
                )
            except httpx.HTTPError:
                mock_requests = None
            corrupt = var_dir / "celery" / "broker" / ".corrupt"
            demo_log = (var_dir / "demo.log").read_text(errors="replace")
            late = [
                n
                for n, r in runs.items()
                if r["status"] not in TERMINAL and time.monotonic() - r["at"] > args.late_after
            ]
            write(
                {
                    "minute": minute,
                    "at": _now(),
                    "worker_pids": pids,
                    "worker_alive": bool(pids),
                    "heartbeat_age_s": age,
                    "web_ok": web_ok,
                    "web_ms": web_ms,
                    "started": None if start_error else name,
                    "start_error": start_error,
                    "runs": dict(Counter(r["status"] for r in runs.values())),
                    "late": late,
                    "mock_requests": mock_requests,
                    "broker_set_aside": len(os.listdir(corrupt)) if corrupt.exists() else 0,
                    "worker_restarts": demo_log.count("the Celery worker exited"),
                    "demo_alive": demo.poll() is None,
                    "banner": _banner_shown(browser),
                }
            )
        finished = [r for r in runs.values() if r["status"] in TERMINAL]
        durations = sorted(r["finished_after_s"] for r in finished if "finished_after_s" in r)
        write(
            {
                "summary": {
                    "end": _now(),
                    "minutes": args.minutes,
                    "runs_started": len(runs),
                    "runs_finished": len(finished),
                    "runs_by_status": dict(Counter(r["status"] for r in runs.values())),
                    "worker_deaths_seen": deaths,
                    "longest_heartbeat_age_s": longest_silence,
                    "finish_seconds_median": durations[len(durations) // 2] if durations else None,
                    "finish_seconds_p95": durations[int(len(durations) * 0.95)]
                    if durations
                    else None,
                    "finish_seconds_max": durations[-1] if durations else None,
                    "unrecoverable_in_demo_log": (var_dir / "demo.log")
                    .read_text(errors="replace")
                    .count("Unrecoverable error"),
                }
            }
        )
        return 0
    except Exception as error:
        write({"error": repr(error), "at": _now()})
        raise
    finally:
        for process in reversed(started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
        for pid in worker_pids(var_dir):  # a worker the demo could not stop
            os.kill(pid, signal.SIGKILL)
        results.close()


if __name__ == "__main__":
    sys.exit(main())
