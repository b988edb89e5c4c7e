"""Plumbing rows every app shares: the worker heartbeat (``core.heartbeat``), the
transactional outbox (``core.outbox``) and the history of role grants (``core.grants``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class WorkerHeartbeat(models.Model):
    """One row per worker (``hostname`` as Celery names it); see ``core.heartbeat``."""

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
    """A Celery task message committed with the rows it is about (``core.outbox``). ``subject``:
    what it is about (``evals.run:12``); ``sent_at``: set once the broker took it."""

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
    """One grant or revocation of a role or superuser, written only by ``core.grants``: ``by``
    (None: command line or system), ``at``, ``via``. Append-only."""

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
