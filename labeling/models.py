"""Human labels: a reviewer's verdict and critique on a trial, and preferences on pairs.

Labels are imported with results recorded elsewhere now; the reviewer's queue and
calibration come in the labeling issue. A label without a user records who labeled it
in ``reviewer_name`` (the source's annotator or method).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Label(models.Model):
    """A reviewer's pass/fail verdict and critique on one trial."""

    class Verdict(models.TextChoices):
        PASS = "pass", "pass"
        FAIL = "fail", "fail"

    class Source(models.TextChoices):
        REVIEWER = "reviewer", "reviewer in Assay"
        IMPORT = "import", "imported"

    trial = models.ForeignKey("evals.Trial", on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="labels",
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    verdict = models.CharField(max_length=4, choices=Verdict.choices)
    critique = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.REVIEWER)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trial_id", "created_at"]

    def __str__(self) -> str:
        return f"{self.verdict} on {self.trial_id}"


class PreferenceLabel(models.Model):
    """A human preference between the two trials of a pair (A or B)."""

    class Preferred(models.TextChoices):
        A = "A", "A"
        B = "B", "B"

    pair = models.ForeignKey("evals.TrialPair", on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="preference_labels",
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    preferred = models.CharField(max_length=1, choices=Preferred.choices)
    critique = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=Label.Source.choices, default="reviewer")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.preferred} on pair {self.pair_id}"
