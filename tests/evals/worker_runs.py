"""Setup the worker fault and dispatch tests share (test_worker_faults.py,
test_worker_dispatch.py): runs on real Celery workers (``tests.evals.test_worker``) against
the shared mock LLM (``tests.mockllm``), the waits around them, a worker killed with SIGKILL
and a survivor that sweeps the run to its end, and the exactness check both files assert."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from config.celery import app
from evals.models import Grade, Run, Trial
from evals.runner.start import run_start
from evals.runner.sweeper import runs_sweep
from tests.evals.test_worker import _suite, _worker_log, _worker_start, _worker_stop

GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


def mock_target(mock, *, concurrency: int) -> dict:
    """An ``openai`` target calling the shared mock ``mock`` with ``concurrency`` calls."""
    return {
        "kind": "openai",
        "base_url": mock.base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        "concurrency": concurrency,
    }


def mock_run_start(mock, *, name: str, cases: int, trials: int, concurrency: int) -> Run:
    """A run of ``cases`` new cases × ``trials`` trials against ``mock`` (``GRADERS``)."""
    return run_start(
        suite=_suite(cases),
        name=name,
        target=mock_target(mock, concurrency=concurrency),
        graders=GRADERS,
        trials_per_case=trials,
    )


def mock_calls(mock) -> int:
    """The calls the mock has received since it started."""
    return mock.stats()["requests"]


def run_assert_exact(run: Run, *, trials: int, calls: int) -> None:
    """The run has ``trials`` trials, every call made is one recorded trial, and every ok
    trial has exactly one grade of each grader."""
    rows = Trial.objects.filter(run=run)
    assert rows.count() == trials
    recorded = rows.filter(status__in=Trial.FINISHED).count()
    assert calls == recorded, (calls, recorded)
    ok = rows.filter(status=Trial.Status.OK).count()
    assert Grade.objects.filter(trial__run=run).count() == ok * len(GRADERS)


def trials_settled_wait(run: Run, timeout: float = 20.0) -> None:
    """Wait until no trial of ``run`` is queued or running (fails after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    open_ = [Trial.Status.QUEUED, Trial.Status.RUNNING]
    while Trial.objects.filter(run=run, status__in=open_).exists():
        assert time.monotonic() < deadline, "trials still open"
        time.sleep(0.1)


def ok_trials_wait(run: Run, n: int, tmp_path: Path, timeout: float = 20.0) -> None:
    """Wait until ``run`` has ``n`` ok trials (fails after ``timeout`` s, with the workers'
    logs under ``tmp_path``)."""
    deadline = time.monotonic() + timeout
    while Trial.objects.filter(run=run, status=Trial.Status.OK).count() < n:
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.05)


@contextmanager
def rescue_worker(worker_queue: str, tmp_path: Path, env: dict) -> Iterator[str]:
    """A solo worker started now on a queue of its own (so it cannot take the test queue's
    chunks first), with ``env``; yields that queue's name and stops the worker at the end."""
    rescue_queue = f"{worker_queue}-rescue"
    survivor, survivor_log = _worker_start(
        rescue_queue, tmp_path / "worker-rescue.log", pool="solo", concurrency=1, env=env
    )
    try:
        yield rescue_queue
    finally:
        _worker_stop(survivor)
        survivor_log.close()


def worker_kill(victim: subprocess.Popen, run: Run, mock) -> int:
    """SIGKILL ``victim``'s process group; returns the calls it made that ``run`` did not
    record (paid and lost at the kill)."""
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    return mock_calls(mock) - Trial.objects.filter(run=run, status__in=Trial.FINISHED).count()


def run_sweep_wait(run: Run, rescue_queue: str, tmp_path: Path, timeout: float = 25.0) -> Run:
    """Send the sweeper's messages to ``rescue_queue`` (restored by the ``worker_queue``
    fixture) and sweep twice a second until ``run`` ends; returns it refreshed."""
    app.conf.task_default_queue = rescue_queue
    deadline = time.monotonic() + timeout
    while not run.is_terminal:
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        runs_sweep()
        time.sleep(0.5)
        run.refresh_from_db()
    return run
