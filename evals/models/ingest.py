"""Bulk ingest's idempotency keys (``interop.ingest``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evals.models.runs import Run


class IngestKey(models.Model):
    """The first successful bulk ingest (``interop.ingest``) under one idempotency key: the
    ``Idempotency-Key`` header or the header object's ``run_key`` (one namespace, unique
    across users). A repeat with the same key and the same body (``body_sha256``, hex of the
    raw request bytes) gets ``status_code`` and ``response`` (JSON text) back and writes
    nothing; a different body under the key is refused (409). The unique key makes two
    concurrent requests with one key write once. A failed request stores no row."""

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
