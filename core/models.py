"""Plumbing rows every app shares: the worker heartbeat (core.heartbeat)."""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker process said it was alive, one row per worker
    (``hostname`` as Celery names it, e.g. ``celery@host``). Written by the worker every
    ``core.heartbeat.HEARTBEAT_SECONDS``; read by the dashboard's "no worker" banner."""

    hostname = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.hostname} (pid {self.pid}) at {self.beat_at:%Y-%m-%d %H:%M:%S}"
