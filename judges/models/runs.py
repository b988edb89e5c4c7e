"""A judge version grading a run's trials (``JudgeRun``, pairwise too) and the injection
probes run against a version (``ProbeRun``): progress, outcome and who started or cancelled
them."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.actors import Via, actor_text
from judges.models.versions import JudgeVersion


class JudgeRun(models.Model):
    """One judge version grading (a sample of) one run's trials; one row per (run, version),
    reused when started again. Counts are recounted from the grade rows.

    Pairwise (``base_run`` set; one row per (head, base, version)): ``trial_ids`` holds
    ``TrialPair`` ids (base = A, head = B), the ``trials_*`` counts count pairs, ``unpaired``
    the ok trials without a counterpart. ``failed``: every grade errored; ``error_message``
    says why (also on a ``succeeded`` run with some errors)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey("evals.Run", on_delete=models.CASCADE, related_name="judge_runs")
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.PROTECT, related_name="judge_runs"
    )
    base_run = models.ForeignKey(
        "evals.Run",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="pairwise_judge_runs_as_base",
    )
    grader = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    unpaired = models.PositiveIntegerField(default=0)
    trial_ids = models.JSONField(default=list, blank=True)
    trials_total = models.PositiveIntegerField(default=0)
    trials_graded = models.PositiveIntegerField(default=0)
    trials_errored = models.PositiveIntegerField(default=0)
    error_message = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_runs_cancelled",
    )
    # Where the cancel came from (``core.actors.Via``; blank while not cancelled).
    cancelled_via = models.CharField(max_length=10, choices=Via.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "judge_version"],
                condition=Q(base_run__isnull=True),
                name="judge_run_unique_run_version",
            ),
            models.UniqueConstraint(
                fields=["run", "base_run", "judge_version"],
                condition=Q(base_run__isnull=False),
                name="judge_run_unique_pairwise",
            ),
        ]

    def __str__(self) -> str:
        if self.base_run_id:
            return f"{self.judge_version} on run {self.run_id} against {self.base_run_id}"
        return f"{self.judge_version} on run {self.run_id}"

    @property
    def cancelled_text(self) -> str:
        """Who cancelled it, after "cancelled" (``core.actors.actor_text``); "" when not
        cancelled or the actor was not recorded."""
        if self.status != self.Status.CANCELLED:
            return ""
        if not self.cancelled_via and self.cancelled_by_id is None:
            return ""
        return actor_text(by=self.cancelled_by, via=self.cancelled_via or None)

    @property
    def is_pairwise(self) -> bool:
        """True for a pairwise judge run (head ``run`` against ``base_run``)."""
        return self.base_run_id is not None

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def progress(self) -> float | None:
        """Trials graded / trials to grade (0..1); None when there is none."""
        return self.trials_graded / self.trials_total if self.trials_total else None


class ProbeRun(models.Model):
    """One run of the injection probes (``judges.probes``) against a version: ``fooled`` of
    ``judged`` probes, ``errored`` apart; ``results``: ``[{"name", "passed", "correct",
    "reason", "reasoning" (untrusted)}]``. A probe run that could not run is ``failed`` with
    ``error``, never an empty report."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.CASCADE, related_name="probe_runs"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    probes_total = models.PositiveIntegerField(null=True, blank=True)
    judged = models.PositiveIntegerField(null=True, blank=True)
    fooled = models.PositiveIntegerField(null=True, blank=True)
    errored = models.PositiveIntegerField(null=True, blank=True)
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"probes on {self.judge_version} ({self.status})"
