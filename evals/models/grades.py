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

    An errored grade (the grader raised, a judge call failed, the reply was unparseable)
    has ``passed = None`` and ``score = None``; every aggregate leaves it out and counts it.
    A "not judged" grade (``status = not_judged``) is a judge rung the grader ladder skipped
    (``skip_if_failed``: a gating deterministic grader already failed the trial): no call was
    made, ``passed`` and ``score`` are None, ``details.decided_by`` names the rung that
    decided. It is neither a pass nor a fail: left out of every rate, calibration, cost
    and agreement; the trial's overall verdict is decided by the rung that failed it.
    """

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
    """Whether a stored judge grade (a dict with ``details`` and ``reason``, e.g. from a run
    file) is an older Assay's placeholder for a rung the ladder skipped: stored then as
    ``ok``/``passed = false`` with ``details.skipped = true`` or a reason starting
    "not judged: " (the markers migration ``evals.0009_grade_not_judged`` recognizes).
    Such a grade is read as not judged, never as a fail."""
    details = grade.get("details")
    return bool(isinstance(details, dict) and details.get("skipped") is True) or str(
        grade.get("reason") or ""
    ).startswith("not judged: ")


class DecisionTransition(models.Model):
    """One change of a trial's contract decision caused by a label change
    (``labeling.decision_history``): ``from_decision`` -> ``to_decision`` (values of
    ``evals.grading.contract.decisions.DECISIONS``), written in the same transaction as the
    label change by ``reviewer`` at ``label_version`` (their ``LabelRevision`` on the trial:
    ``cause`` says which kind: created, revised or undo). The decision itself is never
    stored: it is derived from the labels of record; this is its history."""

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
