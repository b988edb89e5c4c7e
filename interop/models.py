"""An import from the dashboard that runs in the background (interop.import_jobs)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ImportJob(models.Model):
    """An uploaded results file imported by a Celery task. ``file`` is kept in the default storage
    until the job ends; ``options`` the form's choices. Ends ``succeeded`` (``summary``:
    ``ImportSummary.as_json()``; ``run`` to show) or ``failed`` (``error`` naming row and
    field; ``error_field``/``error_record`` as in ``DomainError``). Progress lives in the
    ``progress`` cache (``interop.import_jobs``)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    filename = models.CharField(max_length=255)
    file = models.FileField(upload_to="imports/", max_length=500, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    options = models.JSONField(default=dict)
    summary = models.JSONField(null=True, blank=True)
    run = models.ForeignKey(
        "evals.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=200, blank=True)
    error_record = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"import {self.filename} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL
