"""Presets: named target configurations and grader sets declared in config as code."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import models


def preset_hash(value: Any) -> str:
    """SHA-256 (hex, 64 chars) of a preset's content in canonical JSON (sorted keys)."""
    payload = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Preset(models.Model):
    """A named piece of configuration declared in config-as-code (``apply_config``), with
    the content hash of its ``content`` field. Runs copy a preset into their own snapshot
    when they start, so changing a preset never changes past runs."""

    content_field = ""  # the JSON field hashed into content_hash

    name = models.CharField(max_length=200, unique=True)
    content_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs):
        self.content_hash = preset_hash(getattr(self, self.content_field))
        super().save(*args, **kwargs)


class TargetPreset(Preset):
    """A named target configuration (``apply_config``'s ``[targets.NAME]``)."""

    content_field = "config"
    config = models.JSONField(default=dict)

    class Meta(Preset.Meta):
        pass


class GraderSetPreset(Preset):
    """A named grader set, ``[grader_sets.NAME]``: a list of grader spec dicts."""

    content_field = "graders"
    graders = models.JSONField(default=list)

    class Meta(Preset.Meta):
        pass
