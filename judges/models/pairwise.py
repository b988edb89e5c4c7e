"""A pairwise judge's verdicts: one row per presentation of a pair, in the original A/B
naming."""

from __future__ import annotations

from django.db import models

from judges.models.versions import JudgeVersion


class PairwiseVerdict(models.Model):
    """One presentation of a pair: ``position`` ``original`` (A first) or ``swapped``;
    ``preferred`` in the original naming, null without a verdict; ``nonce`` names its call
    (``JudgeCallRecord.nonce``), empty when none was made."""

    class Position(models.TextChoices):
        ORIGINAL = "original", "A shown first"
        SWAPPED = "swapped", "B shown first"

    class Status(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"

    pair = models.ForeignKey("evals.TrialPair", on_delete=models.CASCADE, related_name="verdicts")
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.PROTECT, related_name="pairwise_verdicts"
    )
    position = models.CharField(max_length=10, choices=Position.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OK)
    preferred = models.CharField(max_length=1, blank=True, choices=[("A", "A"), ("B", "B")])
    score = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    nonce = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge_version", "position"],
                name="pairwise_verdict_unique_presentation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_version} {self.position}: {self.preferred or 'error'}"
