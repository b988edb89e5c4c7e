"""Baselines: the run a suite's new runs are compared against, with its history."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evals.models.runs import Run
from evals.models.suites import Suite


class Baseline(models.Model):
    """The run a suite's new runs are compared against; every change is a new row, so the
    history of who set which baseline, and when, is kept. The current baseline of a suite
    is its latest row."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="baselines")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="baseline_of")
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    set_at = models.DateTimeField(default=timezone.now)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-set_at", "-id"]
        get_latest_by = "set_at"

    def __str__(self) -> str:
        return f"baseline of {self.suite_id}: run {self.run_id}"
