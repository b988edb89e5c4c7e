"""The limiter's Redis lost for a few seconds in the middle of a run on two real workers (a
TCP proxy between the workers and Redis, cut and restored: ``tests.tcp_proxy``). Under
``ASSAY_LIMITER_ON_STORE_LOSS=pause`` (the default) the calls in flight never exceed the
run's ``concurrency`` and the run ends with every call made once; under ``per-process`` each
worker limits on its own and the total exceeds it. Needs REDIS_URL (the PostgreSQL and
Redis pass); the unit tests with a fake store are in test_limiter_store_loss.py."""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

import pytest

from evals.models import Run, Trial
from evals.runner.start import run_start
from tests.evals.test_worker import _run_wait, _suite, _worker_log, worker_factory, worker_queue
from tests.fakellm import FakeLLM
from tests.tcp_proxy import TcpProxy

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.skipif(not REDIS_URL, reason="REDIS_URL not set"),
]

__all__ = ["worker_factory", "worker_queue"]  # fixtures, used by name

GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]
CASES = 64
CONCURRENCY = 4


def _through(proxy: TcpProxy) -> str:
    """REDIS_URL with its host and port replaced by the proxy's."""
    url = urlsplit(REDIS_URL)
    return url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()


def _run_through_a_blip(worker_factory, tmp_path, settings, mode: str):
    """A run of ``CASES`` calls of 300 ms at ``CONCURRENCY`` on two workers whose limiter
    talks to Redis through a proxy cut for 3 s once 8 trials are done; returns (run, the
    most calls in flight, the calls made)."""
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 8}
    url = urlsplit(REDIS_URL)
    with TcpProxy(url.hostname or "127.0.0.1", url.port or 6379) as proxy:
        env = {"ASSAY_LIMITER_REDIS_URL": _through(proxy), "ASSAY_LIMITER_ON_STORE_LOSS": mode}
        worker_factory(env=env)
        worker_factory(env=env)
        with FakeLLM() as llm:
            target = {
                "kind": "openai",
                "base_url": llm.base_url,
                "model": "fake-model",
                "prompt_template": "[latency=300] $input",
                "concurrency": CONCURRENCY,
            }
            run = run_start(
                suite=_suite(CASES), name=mode, target=target, graders=GRADERS, trials_per_case=1
            )
            deadline = time.monotonic() + 40
            while Trial.objects.filter(run=run, status=Trial.Status.OK).count() < 8:
                assert time.monotonic() < deadline, _worker_log(tmp_path)
                time.sleep(0.05)
            peak_before = llm.max_in_flight
            proxy.stop()
            time.sleep(3.0)
            proxy.start()
            run = _run_wait(run, tmp_path)
            return run, peak_before, llm.max_in_flight, llm.requests


def test_under_pause_two_workers_stay_within_the_concurrency_through_a_redis_blip(
    worker_factory, tmp_path, settings
):
    run, before, peak, requests = _run_through_a_blip(worker_factory, tmp_path, settings, "pause")

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == CASES
    assert requests == CASES  # every call made once, none errored by the wait
    assert before == CONCURRENCY  # both workers were busy before the cut
    assert peak == CONCURRENCY
    assert "no new call" in _worker_log(tmp_path)


def test_under_per_process_two_workers_exceed_the_concurrency_through_a_redis_blip(
    worker_factory, tmp_path, settings
):
    run, _, peak, requests = _run_through_a_blip(worker_factory, tmp_path, settings, "per-process")

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert requests == CASES
    assert peak > CONCURRENCY  # each worker its own CONCURRENCY while Redis was away
    assert "limited per process" in _worker_log(tmp_path)
