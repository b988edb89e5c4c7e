"""Bulk ingest's idempotency keys (``interop.ingest``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evals.models.runs import Run


class IngestKey(models.Model):
    """The first successful bulk ingest under one idempotency key (``Idempotency-Key`` or the
    header's ``run_key``, unique across users). A repeat with the same body (``body_sha256``)
    gets ``status_code`` and ``response`` back and writes nothing; another body is a 409. A
    failed request stores no row."""

    key = models.CharField(max_length=255, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    body_sha256 = models.CharField(max_length=64)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="ingest_keys"
    )
    status_code = models.PositiveSmallIntegerField()
    # The response body as JSON text: a replay sends the same bytes (jsonb would reorder keys).
    response = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.key
