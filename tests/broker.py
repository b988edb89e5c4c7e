"""A broker outage for tests: ``broker_unreachable()`` points the project's Celery app at a
port where nothing listens, so every publish from this process fails the way it does when
Redis is down (kombu's ``OperationalError``: connection refused), and restores the real
broker afterwards. The outbox's "broker was down a moment ago" flag is cleared on both
sides, so the next publish tries the broker again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from config.celery import app
from core import outbox

DEAD_BROKER = "redis://127.0.0.1:1/0"


def _pools_drop() -> None:
    # Forget the app's pools, so the next publish builds them for the current broker URL
    # (kombu keeps one pool per URL: the real broker's stays open for when it is back).
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def broker_unreachable() -> Iterator[None]:
    """Every task publish from this process fails while inside."""
    # The embedded default names its transport class (core.filesystem_broker), which would
    # win over the URL's scheme: the dead URL's own transport is used while inside.
    saved = (app.conf.broker_url, app.conf.broker_transport)
    _pools_drop()
    app.conf.broker_url, app.conf.broker_transport = DEAD_BROKER, None
    outbox._broker_down_until = 0.0
    try:
        yield
    finally:
        _pools_drop()
        app.conf.broker_url, app.conf.broker_transport = saved
        outbox._broker_down_until = 0.0
