"""The worker heartbeat: is any Celery worker alive? (the dashboard's "no worker" banner).

A worker process starts a daemon thread when it is ready (Celery's ``worker_ready`` signal,
connected in ``core.apps``) that writes its ``WorkerHeartbeat`` row every
``HEARTBEAT_SECONDS``, whatever the worker is busy with (a solo-pool worker running a long
chunk cannot run another task, so a beat-scheduled heartbeat task would read as a dead
worker). A worker that dies, by ``kill -9`` or an unrecoverable broker error, stops writing.
The dashboard calls ``worker_missing`` on every page: no row newer than
``ASSAY["WORKER_SILENT_SECONDS"]`` (60 s) means no worker will pick up a run.
"""

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

HEARTBEAT_SECONDS = 15.0

_stop = threading.Event()


def worker_heartbeat_record(*, hostname: str, started_at: datetime) -> WorkerHeartbeat:
    """Write ``hostname``'s heartbeat (now, this process's pid); returns the row."""
    now = timezone.now()
    row, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname[:255],
        defaults={"pid": os.getpid(), "started_at": started_at, "beat_at": now},
    )
    return row


def worker_last_seen() -> datetime | None:
    """The newest heartbeat of any worker (aware datetime), or None when none has written."""
    return WorkerHeartbeat.objects.order_by("-beat_at").values_list("beat_at", flat=True).first()


def worker_missing(*, now: datetime | None = None) -> bool:
    """True when no worker has written a heartbeat in ``ASSAY["WORKER_SILENT_SECONDS"]``:
    runs would sit queued. False when tasks run in the web process (``CELERY_TASK_ALWAYS_EAGER``),
    since no worker is needed then."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return False
    seen = worker_last_seen()
    if seen is None:
        return True
    silent = (now or timezone.now()) - seen
    return silent.total_seconds() > settings.ASSAY["WORKER_SILENT_SECONDS"]


def heartbeat_thread_start(*, hostname: str) -> threading.Thread:
    """Start the daemon thread that writes ``hostname``'s heartbeat now and then every
    ``HEARTBEAT_SECONDS`` until ``heartbeat_thread_stop``. A failed write (database busy or
    away) is logged and tried again next time; it never stops the worker."""
    started_at = timezone.now()
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
            if _stop.wait(HEARTBEAT_SECONDS):
                return

    thread = threading.Thread(target=beat, name="assay-worker-heartbeat", daemon=True)
    thread.start()
    return thread


def heartbeat_thread_stop() -> None:
    """Ask the heartbeat thread to end (the worker is shutting down)."""
    _stop.set()
