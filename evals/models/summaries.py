"""Run summaries: what a comparison reads of a finished run, stored when it closes."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from evals.models.runs import Run


class RunSummary(models.Model):
    """What a comparison reads of a finished run, kept so that the first view of any pair
    of runs reads two rows instead of every trial and grade (``evals.comparison.summary``).

    ``key``: the run's fingerprint when the summary was computed (status, grader set,
    trials, grades and their verdicts, judge trust, the suite's case changes); a summary
    whose key differs from the run's current one is stale and never read. ``body``: the
    run's graders, per-case data and judge versions as compact JSON (the ``RunData`` of the
    run's own trials without its identity, which is read fresh from the run). ``detectable``:
    alpha (as text) -> the base's detectable drop at that alpha (``DetectableDrop`` as a dict,
    or None when undefined), filled on first need.
    """

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=300)
    body = models.TextField()
    detectable = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"summary of run {self.run_id}"
