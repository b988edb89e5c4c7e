"""Core's gauges, read at scrape time (``core.metrics.exposition``): worker heartbeats
(``core.heartbeat``), the outbox's backlog (``core.outbox``) and the broker's queue depth.
Each read is bounded: the heartbeat table has a row per worker host, the unsent messages
are counted on the ``outbox_unsent_by_age`` partial index, the broker answers one size
query per queue."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from celery import current_app
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from core.models import OutboxMessage, WorkerHeartbeat

# A worker silent for longer than this is no longer listed (its host is gone), seconds.
WORKER_LISTED_S = 24 * 3600


def core_gauges(*, now: datetime | None = None) -> Iterable[Metric]:
    """The heartbeat ages, outbox backlog and broker queue depth as metric families."""
    now = now or timezone.now()
    yield from heartbeat_gauges(now=now)
    yield from outbox_gauges(now=now)
    yield from broker_gauges()


def heartbeat_gauges(*, now: datetime) -> Iterable[Metric]:
    """``assay_worker_heartbeat_age_seconds{worker}`` of each worker heard from in the last day
    (one query on a table of a row per worker host)."""
    age = GaugeMetricFamily(
        "assay_worker_heartbeat_age_seconds",
        "Seconds since the worker's last heartbeat (written every ASSAY_HEARTBEAT_SECONDS); "
        "workers silent for a day are not listed.",
        labels=["worker"],
    )
    rows = WorkerHeartbeat.objects.filter(
        beat_at__gte=now - timedelta(seconds=WORKER_LISTED_S)
    ).values_list("hostname", "beat_at")
    for hostname, beat_at in rows:
        age.add_metric([hostname], max(0.0, (now - beat_at).total_seconds()))
    yield age


def outbox_gauges(*, now: datetime) -> Iterable[Metric]:
    """``assay_outbox_unsent`` and ``assay_outbox_oldest_unsent_age_seconds`` (0 when none is
    waiting), one query on the unsent messages' partial index."""
    row = OutboxMessage.objects.unsent().aggregate(n=Count("id"), oldest=Min("created_at"))
    yield GaugeMetricFamily(
        "assay_outbox_unsent",
        "Task messages committed and not yet taken by the broker (core.outbox).",
        value=row["n"],
    )
    oldest = row["oldest"]
    yield GaugeMetricFamily(
        "assay_outbox_oldest_unsent_age_seconds",
        "Seconds the oldest unsent task message has waited; 0 when none waits.",
        value=0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()),
    )


def broker_gauges() -> Iterable[Metric]:
    """``assay_broker_queue_messages{queue}``: messages waiting in the default task queue (Redis:
    its list lengths; the embedded broker: its message files). Raises the broker's error when
    unreachable (the source is then reported down)."""
    depth = GaugeMetricFamily(
        "assay_broker_queue_messages",
        "Task messages waiting in the broker's queue (none under CELERY_TASK_ALWAYS_EAGER).",
        labels=["queue"],
    )
    queue = current_app.conf.task_default_queue
    if not current_app.conf.task_always_eager:
        with current_app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1)
            # ``_size``: a virtual transport's own count (kombu's Redis and filesystem ones);
            # celery-types types the channel as the abstract StdChannel, which lacks it.
            channel = connection.default_channel
            size = channel._size(queue)  # type: ignore[attr-defined]
            depth.add_metric([queue], float(size))
    yield depth
