"""Per-user API tokens for CI and scripts: stored as a SHA-256 hash, shown once."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token of one user. Only ``key_hash`` (SHA-256 hex of the token) is stored;
    a revoked token (``revoked_at`` set) never authenticates again."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=200, help_text="What the token is for, e.g. 'CI'.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="api_tokens_created",
        help_text="The lead who created it on the page; empty: manage.py token_create.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} / {self.name}"
