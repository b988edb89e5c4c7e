"""A run's ``concurrency`` is its total over every worker: two real worker processes
(the shared limiter in Redis when REDIS_URL is set, else in the SQLite file under
ASSAY_VAR_DIR) never put more calls in flight than the run allows."""

from __future__ import annotations

import time

import pytest

from evals.models import Run, Trial
from evals.runner.start import run_start
from tests.evals.test_worker import (  # noqa: F401 - the fixtures
    _run_wait,
    _suite,
    _worker_log,
    worker_factory,
    worker_queue,
)
from tests.fakellm import FakeLLM

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


def test_two_workers_together_never_exceed_the_runs_concurrency(
    worker_factory,  # noqa: F811
    tmp_path,
    settings,
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 6}
    worker_factory()
    worker_factory()
    _workers_ready(tmp_path, 2)  # else the first one up can take every chunk on a busy machine
    suite = _suite(24)
    with FakeLLM() as llm:
        target = {
            "kind": "openai",
            "base_url": llm.base_url,
            "model": "fake-model",
            "prompt_template": "[latency=200] $input",
            "concurrency": 4,
        }
        run = run_start(suite=suite, name="two", target=target, graders=GRADERS, trials_per_case=1)
        run = _run_wait(run, tmp_path)
        max_in_flight, requests = llm.max_in_flight, llm.requests

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == 24
    assert requests == 24  # every call made once
    # both workers took chunks: each alone would have put its chunk's 4 in flight
    # (a chunk's task may log its end a moment after the run's last trial is written)
    deadline = time.monotonic() + 10
    while True:
        logs = [p.read_text(errors="replace") for p in sorted(tmp_path.glob("worker-*.log"))]
        took = [
            "run_chunk_execute" in log and "succeeded" in log and "raised" not in log
            for log in logs
        ]
        if (len(took) == 2 and all(took)) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(took) == 2 and all(took), logs
    assert max_in_flight == 4


def _workers_ready(tmp_path, n: int, timeout_s: float = 25.0) -> None:
    """Wait until ``n`` worker logs say the worker is ready to consume (Celery's "ready.")."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = [p.read_text(errors="replace") for p in sorted(tmp_path.glob("worker-*.log"))]
        if sum(" ready." in log for log in logs) >= n:
            return
        time.sleep(0.1)
    pytest.fail(f"fewer than {n} workers ready after {timeout_s} s:\n" + "\n".join(logs))
