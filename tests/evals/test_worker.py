"""Runs executed by a real Celery worker process, through the real broker.

The worker is a ``celery -A config worker`` subprocess on the same test database (SQLite:
the file test database of config/settings_test.py; PostgreSQL: the test database named in
DATABASE_URL) and the same broker (Redis when REDIS_URL is set, else the filesystem broker
under ASSAY_VAR_DIR), listening on a queue of its own so no other worker takes its tasks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from config.celery import app
from evals.models import Case, Grade, Run, Suite, Trial
from evals.runner.start import run_start
from evals.runner.targets import CaseInput, target_from_config
from evals.tasks import run_chunk_execute
from tests.conftest import PROJECT_DIR
from tests.fakellm import FakeLLM

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

WAIT_SECONDS = 60


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "")
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{db['NAME']}"


@pytest.fixture
def worker_queue():
    """A queue of this test's own; tasks sent by the test process go to it, not eagerly."""

    name = f"assay-test-{uuid.uuid4().hex[:12]}"
    saved = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager = False
    app.conf.task_default_queue = name
    yield name
    app.conf.task_always_eager, app.conf.task_default_queue = saved


def _worker_start(
    queue_name: str,
    log_path: Path,
    *,
    pool: str,
    concurrency: int,
    env: dict | None = None,
    app_module: str = "config",
):
    """A ``celery -A <app_module> worker`` on ``queue_name``; ``tests.worker_app`` (with
    ``ASSAY_TEST_QUEUE`` in ``env``) sends the tasks the worker enqueues to that queue too."""
    base_env = env
    env = os.environ.copy()
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=_database_url(),
        CELERY_TASK_ALWAYS_EAGER="false",
        DEBUG="true",
        **(base_env or {}),
    )
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app_module,
        "worker",
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        "--queues",
        queue_name,
        "--loglevel",
        "INFO",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        f"{queue_name}@%h",
    ]
    log = log_path.open("wb")
    process = subprocess.Popen(
        command,
        cwd=PROJECT_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process, log


def _worker_stop(process: subprocess.Popen) -> None:
    """Warm shutdown (SIGTERM), then SIGKILL of the whole process group after 20 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture
def worker_factory(worker_queue, tmp_path):
    """Start workers on the test's queue; every one is stopped (killed if need be) at the end."""
    started = []

    def start(
        *,
        pool: str = "solo",
        concurrency: int = 1,
        env: dict | None = None,
        app_module: str = "config",
    ) -> subprocess.Popen:
        """``env``: extra environment of the worker (``ASSAY_TRIAL_LEASE_SECONDS``...);
        ``app_module``: the Celery app's module (``-A``)."""
        log_path = tmp_path / f"worker-{len(started)}.log"
        process, log = _worker_start(
            worker_queue,
            log_path,
            pool=pool,
            concurrency=concurrency,
            env=env,
            app_module=app_module,
        )
        started.append((process, log, log_path))
        return process

    yield start
    for process, log, _ in started:
        try:
            _worker_stop(process)
        finally:
            log.close()


def _worker_log(tmp_path: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("worker-*.log"))


def _run_wait(run: Run, tmp_path: Path) -> Run:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.is_terminal:
            return run
        time.sleep(0.25)
    log = _worker_log(tmp_path)
    pytest.fail(f"run still {run.status} after {WAIT_SECONDS} s; worker log:\n{log}")


def _suite(n_cases: int) -> Suite:
    suite = Suite.objects.create(name=f"worker-{uuid.uuid4().hex[:8]}")
    for i in range(n_cases):
        Case.objects.create(suite=suite, key=f"c{i:02d}", input=f"question {i}", expected="yes")
    return suite


SIMULATED = {"kind": "simulated", "model": "simulated", "seed": 7, "error_probability": 0.0}


def _openai_target(llm: FakeLLM) -> dict:
    return {
        "kind": "openai",
        "base_url": llm.base_url,
        "model": "fake-model",
        "prompt_template": "[latency=100] $input",
        "concurrency": 4,
    }


GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


def test_a_real_worker_executes_a_simulated_run_to_success(worker_factory, tmp_path, settings):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 7}
    worker_factory()
    suite = _suite(10)

    run = run_start(suite=suite, name="w1", target=SIMULATED, graders=GRADERS, trials_per_case=3)
    run = _run_wait(run, tmp_path)

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (30, 30, 0)
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == 30
    assert Grade.objects.filter(trial__run=run, grader="nonempty").count() == 30
    assert run.started_at is not None and run.finished_at is not None


def test_a_real_worker_ignores_a_redelivered_chunk(worker_factory, tmp_path, settings):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 100}
    worker_factory(pool="threads", concurrency=2)
    suite = _suite(10)

    with FakeLLM() as llm:  # a real endpoint, so a second call would be counted
        run = run_start(
            suite=suite,
            name="w2",
            target=_openai_target(llm),
            graders=GRADERS,
            trials_per_case=1,
        )
        trial_ids = list(Trial.objects.filter(run=run).values_list("id", flat=True))
        # The same message delivered again, possibly at the same time on the second thread.
        run_chunk_execute.delay(run.id, trial_ids)
        run = _run_wait(run, tmp_path)
        time.sleep(1.0)  # let the duplicate finish too
        run.refresh_from_db()
        calls = llm.requests

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert Trial.objects.filter(run=run).count() == 10
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (10, 10, 0)
    assert Grade.objects.filter(trial__run=run).count() == 10
    assert calls == 10


def test_a_real_worker_ends_a_run_with_pipeline_errors_failed(worker_factory, tmp_path):

    worker_factory()
    suite = _suite(10)
    target = {**SIMULATED, "error_probability": 0.3}

    async def expected_errors() -> int:
        simulated = target_from_config(target)
        results = [
            await simulated.call(CaseInput(key=f"c{i:02d}", input="q", expected="yes", attempt=a))
            for i in range(10)
            for a in (1, 2)
        ]
        return sum(not r.ok for r in results)

    errors = asyncio.run(expected_errors())
    assert 0 < errors < 20  # the seed gives a mix, so both outcomes are exercised

    run = _run_wait(
        run_start(suite=suite, name="w3", target=target, graders=GRADERS, trials_per_case=2),
        tmp_path,
    )

    assert run.status == Run.Status.FAILED, _worker_log(tmp_path)
    assert (run.trials_finished, run.trials_errored) == (20, errors)
    assert run.error_message == f"{errors} of 20 trials errored"
    assert not Grade.objects.filter(trial__run=run, trial__status=Trial.Status.ERROR).exists()
    assert Grade.objects.filter(trial__run=run).count() == 20 - errors
