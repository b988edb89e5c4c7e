"""Is any Celery worker alive? A thread of each worker writes its row every
``ASSAY_HEARTBEAT_SECONDS`` (15 unless set) whatever it runs (a beat task would wait behind a
solo pool's chunk)."""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from core.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

_stop = threading.Event()


def worker_heartbeat_record(*, hostname: str, started_at: datetime) -> WorkerHeartbeat:
    """Write ``hostname``'s heartbeat (now, this pid)."""
    now = timezone.now()
    row, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname[:255],
        defaults={"pid": os.getpid(), "started_at": started_at, "beat_at": now},
    )
    return row


def worker_last_seen() -> datetime | None:
    """The newest heartbeat (aware), or None."""
    return WorkerHeartbeat.objects.order_by("-beat_at").values_list("beat_at", flat=True).first()


def worker_missing(*, now: datetime | None = None) -> bool:
    """True when no heartbeat is newer than ``WORKER_SILENT_SECONDS``; False under
    ``CELERY_TASK_ALWAYS_EAGER`` (no worker needed)."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return False
    seen = worker_last_seen()
    if seen is None:
        return True
    silent = (now or timezone.now()) - seen
    return silent.total_seconds() > settings.ASSAY["WORKER_SILENT_SECONDS"]


def heartbeat_thread_start(*, hostname: str) -> threading.Thread:
    """Start the thread writing every ``ASSAY_HEARTBEAT_SECONDS``. A failed write is logged and
    retried; it never stops the worker."""
    started_at = timezone.now()
    every_s = settings.ASSAY["HEARTBEAT_SECONDS"]
    _stop.clear()

    def beat() -> None:
        while True:
            try:
                worker_heartbeat_record(hostname=hostname, started_at=started_at)
            except Exception:  # noqa: BLE001 - a heartbeat must never take the worker down
                logger.exception("worker heartbeat not written")
            finally:
                close_old_connections()
                connection.close()
            if _stop.wait(every_s):
                return

    thread = threading.Thread(target=beat, name="assay-worker-heartbeat", daemon=True)
    thread.start()
    return thread


def heartbeat_thread_stop() -> None:
    """Ask the heartbeat thread to end (the worker is shutting down)."""
    _stop.set()
