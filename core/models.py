"""Plumbing rows every app shares: the worker heartbeat (``core.heartbeat``) and the
transactional outbox (``core.outbox``)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


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


class OutboxMessageQuerySet(models.QuerySet):
    def unsent(self) -> OutboxMessageQuerySet:
        return self.filter(sent_at__isnull=True)


class OutboxMessage(models.Model):
    """One Celery task message to publish, committed in the same transaction as the rows it
    is about (a run and its trials, a top-up, a judge run), so a broker outage can delay the
    task but never lose it (``core.outbox``).

    ``subject`` names what the message is about (``evals.run:12``), so a surface can say
    "this run waits for the broker"; ``sent_at`` is set once the broker took the message;
    ``attempts`` and ``last_error`` record failed publishes.
    """

    task = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    subject = models.CharField(max_length=100, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    objects = OutboxMessageQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"],
                condition=models.Q(sent_at__isnull=True),
                name="outbox_unsent_by_age",
            )
        ]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)}"
