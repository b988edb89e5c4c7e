"""Grades, a grader's verdict on a trial, and the history of a trial's contract decision.

One grade per (trial, grader), enforced by the database, so a redelivered or retried task
never duplicates or loses a row. Unknown is null: an errored grade has ``passed = None``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from evals.models.runs import Trial


class GradeQuerySet(models.QuerySet):
    def ok(self) -> GradeQuerySet:
        return self.filter(status=Grade.Status.OK)

    def errored(self) -> GradeQuerySet:
        return self.filter(status=Grade.Status.ERROR)

    def not_judged(self) -> GradeQuerySet:
        return self.filter(status=Grade.Status.NOT_JUDGED)


class Grade(models.Model):
    """A grader's verdict on a trial: passed, score 0..1, reason, status.

    An errored grade has ``passed`` and ``score`` None; aggregates leave it out and count it. A
    "not judged" grade is a judge rung the ladder skipped (``skip_if_failed``; no call made,
    ``details.decided_by`` names the rung that decided): neither a pass nor a fail, left out of
    every rate, calibration, cost and agreement."""

    class Status(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"
        NOT_JUDGED = "not_judged", "not judged"

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="grades")
    grader = models.CharField(max_length=200)
    grader_version = models.CharField(max_length=100, blank=True)
    judge_version = models.ForeignKey(
        "judges.JudgeVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="grades",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OK)
    passed = models.BooleanField(null=True)
    score = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    gating = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GradeQuerySet.as_manager()

    class Meta:
        ordering = ["trial_id", "grader"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "grader"], name="grade_unique_trial_grader"),
            models.CheckConstraint(
                condition=Q(status__in=["error", "not_judged"], passed__isnull=True)
                | Q(status="ok", passed__isnull=False),
                name="grade_passed_null_iff_not_ok",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=0, score__lte=1),
                name="grade_score_in_unit_interval",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.grader} on {self.trial_id}"


def grade_skipped_placeholder(grade: dict) -> bool:
    """Whether a stored judge grade (a dict with ``details`` and ``reason``, e.g. from a run file)
    is an older Assay's placeholder for a skipped rung (the markers of migration
    ``evals.0009_grade_not_judged``): read as not judged, never as a fail."""
    details = grade.get("details")
    return bool(isinstance(details, dict) and details.get("skipped") is True) or str(
        grade.get("reason") or ""
    ).startswith("not judged: ")


class DecisionTransition(models.Model):
    """One change of a trial's contract decision caused by a label change, written in the same
    transaction: ``from_decision`` -> ``to_decision`` (``DECISIONS`` values), by ``reviewer`` at
    ``label_version``. The decision itself is derived, never stored; this is its history."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="decision_transitions")
    from_decision = models.CharField(max_length=30)
    to_decision = models.CharField(max_length=30)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    label_version = models.PositiveIntegerField()
    cause = models.CharField(max_length=20)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"trial {self.trial_id}: {self.from_decision} -> {self.to_decision}"
