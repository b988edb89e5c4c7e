"""A worker never gives up on a lost broker (``CELERY_BROKER_CONNECTION_MAX_RETRIES = None``,
config/settings.py): a real worker whose Redis goes away (a TCP proxy between it and Redis,
cut: ``tests.tcp_proxy``) for longer than Celery's default 100 tries take on a shortened
schedule (``tests.worker_app_fast_retry``) reconnects when Redis is back and runs the next
run; the same worker with the default 100 tries gives up. Needs REDIS_URL (the broker)."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import urlsplit

import pytest

from config.celery import app
from evals.models import Run
from evals.runner.start import run_start
from tests.evals.test_worker import (
    GRADERS,
    SIMULATED,
    _run_wait,
    _suite,
    _worker_log,
    worker_factory,
    worker_queue,
)
from tests.tcp_proxy import TcpProxy

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

__all__ = ["worker_factory", "worker_queue"]  # fixtures, used by name

DEFAULT_TRIES = 100  # Celery's own broker_connection_max_retries
RETRY_S = 0.05


def test_the_workers_never_give_up_on_the_broker():
    assert app.conf.broker_connection_max_retries is None


def _tries(tmp_path) -> int:
    """The last reconnect try the worker's log counts ("Trying again now... (N/max)")."""
    log = (tmp_path / "worker-0.log").read_text(errors="replace")
    counts = [int(n) for n in re.findall(r"Trying again [^(]*\((\d+)/", log)]
    return max(counts, default=0)


def _worker_through(worker_factory, tmp_path, proxy: TcpProxy, **env: str):
    url = urlsplit(REDIS_URL)
    through = url._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
    env = {
        "REDIS_URL": through,
        "ASSAY_LIMITER_REDIS_URL": REDIS_URL,
        "ASSAY_TEST_RETRY_S": str(RETRY_S),
        **env,
    }
    process = worker_factory(env=env, app_module="tests.worker_app_fast_retry")
    deadline = time.monotonic() + 20
    while "ready." not in _worker_log(tmp_path):
        assert time.monotonic() < deadline and process.poll() is None, _worker_log(tmp_path)
        time.sleep(0.1)
    return process


def _cut_until(tmp_path, proxy: TcpProxy, process, tries: int, timeout: float) -> None:
    """Cut the proxy until the worker's log counts ``tries`` reconnect tries (or it exits)."""
    proxy.stop()
    deadline = time.monotonic() + timeout
    while _tries(tmp_path) < tries and process.poll() is None:
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.1)


@pytest.mark.skipif(not REDIS_URL, reason="REDIS_URL not set")
def test_a_worker_reconnects_after_more_tries_than_celerys_default(
    worker_factory, tmp_path, settings
):
    url = urlsplit(REDIS_URL)
    with TcpProxy(url.hostname or "127.0.0.1", url.port or 6379) as proxy:
        process = _worker_through(worker_factory, tmp_path, proxy)
        _cut_until(tmp_path, proxy, process, DEFAULT_TRIES + 20, timeout=20)
        proxy.start()

        run = run_start(
            suite=_suite(4), name="after", target=SIMULATED, graders=GRADERS, trials_per_case=1
        )
        run = _run_wait(run, tmp_path)

    log = _worker_log(tmp_path)
    assert process.poll() is None, log
    assert _tries(tmp_path) > DEFAULT_TRIES
    assert run.status == Run.Status.SUCCEEDED, log


@pytest.mark.skipif(not REDIS_URL, reason="REDIS_URL not set")
def test_with_celerys_default_a_worker_gives_up_after_its_tries(worker_factory, tmp_path):
    """The control: the same worker with ``broker_connection_max_retries = 100`` exits
    after its 100th try while Redis is still away."""
    url = urlsplit(REDIS_URL)
    with TcpProxy(url.hostname or "127.0.0.1", url.port or 6379) as proxy:
        process = _worker_through(
            worker_factory, tmp_path, proxy, ASSAY_TEST_BROKER_MAX_RETRIES=str(DEFAULT_TRIES)
        )
        proxy.stop()  # and never back while it tries
        deadline = time.monotonic() + 20
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)

    log = _worker_log(tmp_path)
    assert process.poll() is not None, log  # it stopped: nothing consumes any more
    assert _tries(tmp_path) == DEFAULT_TRIES
