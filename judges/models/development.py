"""A judge version's development data: the labels its few-shot examples came from, held out
of its calibration figures and trust."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from judges.models.versions import JudgeVersion


class DevelopmentLabel(models.Model):
    """A label a judge version's few-shot examples came from, never counted in its figures or
    trust. Written once by ``labeling.improve.judge_version_improve``. Held out by trial (the
    judge saw that output), so ``trial`` stays when the label is removed (``label`` null)."""

    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.CASCADE, related_name="development_labels"
    )
    trial = models.ForeignKey(
        "evals.Trial", on_delete=models.CASCADE, related_name="development_labels"
    )
    label = models.ForeignKey(
        "labeling.Label",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="development_of",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["judge_version_id", "trial_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge_version", "label"], name="development_label_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"label {self.label_id} (trial {self.trial_id}) develops {self.judge_version_id}"


def development_trial_ids(judge_version_ids) -> set[int]:
    """Trial ids any of ``judge_version_ids`` was built from (its development data)."""
    return set(
        DevelopmentLabel.objects.filter(judge_version_id__in=list(judge_version_ids)).values_list(
            "trial_id", flat=True
        )
    )
