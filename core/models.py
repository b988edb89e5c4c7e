"""Plumbing rows every app shares: the worker heartbeat (``core.heartbeat``), the
transactional outbox (``core.outbox``) and the history of role grants (``core.grants``)."""

from __future__ import annotations

from django.conf import settings
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


class OutboxMessageQuerySet(models.QuerySet["OutboxMessage"]):
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


class RoleChange(models.Model):
    """One grant or revocation of a role (``reviewer``, ``engineer``, ``lead``, or
    ``superuser``), written only by ``core.grants``: who (``by``, None for the command line
    or the system), when (``at``) and through what (``via``: page, api, command, admin).
    Only grows; the admin shows it read-only."""

    class Action(models.TextChoices):
        GRANTED = "granted"
        REVOKED = "revoked"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="role_changes"
    )
    role = models.CharField(max_length=20)
    action = models.CharField(max_length=10, choices=Action.choices)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    via = models.CharField(max_length=20)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.role} {self.action} for {self.user_id} at {self.at:%Y-%m-%d %H:%M:%S}"
