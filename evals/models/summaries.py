"""Run summaries: what a comparison reads of a finished run, stored when it closes."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from evals.models.runs import Run


class RunSummary(models.Model):
    """What a comparison reads of a finished run (``evals.comparison.summary``). ``key``: the run's
    summary key when computed (a differing key is stale, never read); ``body``: its
    ``RunData`` as compact JSON, without identity; ``detectable``: alpha (text) -> the base's
    detectable drop as a dict or None, filled on first need."""

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=300)
    body = models.TextField()
    detectable = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"summary of run {self.run_id}"
