"""The Celery app of worker tests that cut the broker (test_worker_broker_retry.py): the
project's app, its conf untouched, with kombu's reconnect schedule shortened to a try every
``ASSAY_TEST_RETRY_S`` seconds (kombu's own is 2 s growing to 30 s, which Celery does not
make configurable), so a test sees more tries than Celery's default 100 in seconds.
``ASSAY_TEST_BROKER_MAX_RETRIES`` (a number) sets ``broker_connection_max_retries``, for the
control test of a worker that gives up. ``celery -A tests.worker_app_fast_retry worker``."""

import os

from kombu import Connection

from config.celery import app

_RETRY_S = float(os.environ.get("ASSAY_TEST_RETRY_S", "0.05"))
_ensure_connection = Connection._ensure_connection


def _ensure_connection_fast(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    kwargs.update(interval_start=_RETRY_S, interval_step=0.0, interval_max=_RETRY_S)
    return _ensure_connection(self, *args, **kwargs)


Connection._ensure_connection = _ensure_connection_fast  # type: ignore[method-assign]

if os.environ.get("ASSAY_TEST_BROKER_MAX_RETRIES"):
    app.conf.broker_connection_max_retries = int(os.environ["ASSAY_TEST_BROKER_MAX_RETRIES"])

__all__ = ["app"]
