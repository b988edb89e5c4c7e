"""A worker killed with SIGKILL in the judge phase, counted against the mock's bill (the
shared mock, judge mode): calls it had claimed but not sent (waiting for the endpoint's
limiter, whose slots this test holds) are in the ledger as ``claimed``, never as calls sent;
calls it had sent with no answer recorded, judged again after the recovery, are shown as
paid again. A second worker (its own queue) and the sweep finish the rung."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from django.urls import reverse

from config.celery import app
from evals.models import Grade, Run
from evals.report.selectors import run_report
from evals.runner.sweeper import runs_sweep
from judges.models import JudgeCallRecord
from judges.tasks import run_chunk_judge
from providers.limiter import Limiter
from tests.conftest import PASSWORD
from tests.evals.test_worker import _worker_log, worker_factory, worker_queue
from tests.evals.worker_runs import rescue_worker
from tests.judges.test_judge_worker import _trials, _version
from tests.mockllm import mockllm

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

__all__ = ["mockllm", "worker_factory", "worker_queue"]  # fixtures, used by name

LEASE_S = 3
ENV = {"ASSAY_TRIAL_LEASE_SECONDS": str(LEASE_S)}


def _judged(n: int, version) -> tuple[Run, list[int]]:
    run, ids = _trials(n, status=Run.Status.RUNNING)
    run.graders = [
        {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}
    ]
    run.save()
    return run, ids


def _ledger_wait(run: Run, status: str, n: int, tmp_path) -> None:
    deadline = time.monotonic() + 20
    while JudgeCallRecord.objects.filter(run=run, status=status).count() < n:
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.05)


def _kill(victim) -> None:
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)


def _recover(run: Run, worker_queue: str, tmp_path) -> Run:
    """A rescue worker and the sweep until ``run`` ends (its dead claims' lease runs out)."""
    with rescue_worker(worker_queue, tmp_path, ENV) as rescue_queue:
        app.conf.task_default_queue = rescue_queue  # restored by the worker_queue fixture
        deadline = time.monotonic() + 30
        while not run.is_terminal:
            assert time.monotonic() < deadline, _worker_log(tmp_path)
            runs_sweep()
            time.sleep(0.5)
            run.refresh_from_db()
    return run


def test_calls_claimed_but_never_sent_when_the_worker_dies_are_not_calls_sent(
    worker_factory, worker_queue, mockllm, tmp_path, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_LEASE_SECONDS": LEASE_S}
    server = mockllm("--latency-ms", "40", "--judge-flip", "0")
    key = f"judge-loss-{time.time_ns()}"
    version = _version(server, concurrency=2, limit_key=key)
    run, ids = _judged(4, version)
    # every slot of the endpoint held here (the shared limiter: Redis, else the SQLite file)
    holder = Limiter(key=key, capacity=2, lease_s=60)
    loop = asyncio.new_event_loop()  # the holder's store client belongs to one loop

    async def take():
        return [await holder.acquire() for _ in range(2)]

    loop.run_until_complete(take())
    victim = worker_factory(env=ENV)
    run_chunk_judge.delay(run.id, ids)
    _ledger_wait(run, JudgeCallRecord.Status.CLAIMED, 2, tmp_path)  # permitted, waiting
    time.sleep(0.3)
    _kill(victim)
    assert server.stats()["requests"] == 0  # nothing went out
    spend = run_report(run=run).judge_calls
    assert (spend.calls, spend.unsent, spend.unanswered, spend.requests) == (0, 2, 0, 0)

    loop.run_until_complete(holder.aclose())  # the slots back
    loop.close()
    run = _recover(run, worker_queue, tmp_path)

    bill = server.stats()["requests"]
    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    assert Grade.objects.filter(trial__run=run, grader="judge").count() == 4
    spend = run_report(run=run).judge_calls
    assert bill == 4 and spend.calls == bill  # calls sent: what the mock was paid for
    assert (spend.unsent, spend.unanswered, spend.repaid) == (2, 0, 0)
    assert spend.requests == bill


def test_calls_in_flight_when_the_worker_dies_are_shown_paid_again(
    worker_factory, worker_queue, mockllm, tmp_path, settings, client, carol
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_LEASE_SECONDS": LEASE_S}
    server = mockllm("--latency-ms", "1500", "--judge-flip", "0")
    version = _version(server, concurrency=2)
    run, ids = _judged(2, version)
    victim = worker_factory(env=ENV)
    run_chunk_judge.delay(run.id, ids)
    _ledger_wait(run, JudgeCallRecord.Status.SENT, 2, tmp_path)  # both going out
    deadline = time.monotonic() + 10
    while server.stats()["requests"] < 2:  # both in flight at the mock
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.05)
    _kill(victim)
    run = _recover(run, worker_queue, tmp_path)

    bill = server.stats()["requests"]
    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    spend = run_report(run=run).judge_calls
    assert bill == 4 and (spend.calls, spend.unanswered, spend.repaid) == (4, 2, 2)
    assert spend.unsent == 0
    assert client.login(username="carol", password=PASSWORD)
    page = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert "4 calls sent" in page
    assert "2 calls sent before a worker was lost" in page and "were paid again" in page
