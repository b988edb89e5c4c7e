"""Judges, their immutable content-addressed versions, and the approval that trusts one.
A new version is untrusted: its grades are provisional until a lead's approval (an active
``JudgeApproval``, the one home of trust).
"""

from __future__ import annotations

import hashlib
import json
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Judge(models.Model):
    """A named LLM grader; its behaviour lives in its versions."""

    class Kind(models.TextChoices):
        RUBRIC = "rubric", "rubric (pointwise)"
        PAIRWISE = "pairwise", "pairwise"
        FAITHFULNESS = "faithfulness", "faithfulness"
        FAITHFULNESS_CLAIMS = "faithfulness_claims", "faithfulness (claim mode)"
        CONTEXT_RELEVANCE = "context_relevance", "context relevance"
        RECORDED = "recorded", "recorded elsewhere (imported)"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def judge_version_hash(
    *,
    model: str,
    protocol: str,
    prompt_template: str,
    params: dict,
    output_schema: dict,
    threshold: float | None,
    base_url: str = "",
) -> str:
    """SHA-256 (hex) over everything that defines a version's behaviour; ``base_url`` only when
    set, so versions recorded elsewhere keep their imported hash."""
    extra = {"base_url": base_url} if base_url else {}
    payload = json.dumps(
        {
            **extra,
            "model": model,
            "protocol": protocol,
            "prompt_template": prompt_template,
            "params": params,
            "output_schema": output_schema,
            "threshold": threshold,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgeVersionQuerySet(models.QuerySet):
    def _active_approval(self) -> models.Exists:
        return models.Exists(
            JudgeApproval.objects.active().filter(judge_version=models.OuterRef("pk"))
        )

    def trusted(self) -> JudgeVersionQuerySet:
        """Versions with an active approval."""
        return self.filter(self._active_approval())

    def untrusted(self) -> JudgeVersionQuerySet:
        """Versions without an active approval (provisional)."""
        return self.filter(~self._active_approval())

    def with_trust(self) -> JudgeVersionQuerySet:
        """Each version annotated with ``trusted`` (bool), so ``is_trusted`` needs no query."""
        return self.annotate(trusted=self._active_approval())


class JudgeVersion(models.Model):
    """An immutable LLM grader: model, prompt template, parameters, output schema. ``protocol``
    names the prompt protocol of a version recorded elsewhere."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64, editable=False)
    base_url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200)
    protocol = models.CharField(max_length=200, blank=True)
    prompt_template = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(default=dict, blank=True)
    threshold = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = JudgeVersionQuerySet.as_manager()

    class Meta:
        ordering = ["judge__name", "number"]
        constraints = [
            models.UniqueConstraint(fields=["judge", "number"], name="judge_version_unique_number"),
            models.UniqueConstraint(
                fields=["judge", "content_hash"], name="judge_version_unique_content"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge.name} v{self.number}"

    def save(self, *args, **kwargs):
        self.content_hash = judge_version_hash(
            model=self.model,
            protocol=self.protocol,
            prompt_template=self.prompt_template,
            params=self.params,
            output_schema=self.output_schema,
            threshold=self.threshold,
            base_url=self.base_url,
        )
        super().save(*args, **kwargs)

    @property
    def grader_key(self) -> str:
        """The key its grades carry in ``Grade.grader``."""
        return f"judge:{self.judge.name}:v{self.number}"

    def refresh_from_db(self, *args, **kwargs) -> None:
        self.__dict__.pop("trusted", None)  # trust is re-read, as every other field
        super().refresh_from_db(*args, **kwargs)

    @property
    def is_trusted(self) -> bool:
        """True while an unrevoked approval exists; one query unless the queryset came from
        ``with_trust()``."""
        if not hasattr(self, "trusted"):
            self.trusted = self.approvals.active().exists()
        return bool(self.trusted)


class JudgeApprovalQuerySet(models.QuerySet):
    def active(self) -> JudgeApprovalQuerySet:
        """Approvals not revoked: at most one per judge version, which is then trusted."""
        return self.filter(revoked_at__isnull=True)


class JudgeApproval(models.Model):
    """A lead's approval of a judge version, with the calibration figures it was granted
    on (``Calibration.as_json()``); revoked approvals keep who, when and why."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.CASCADE, related_name="approvals"
    )
    calibration_set = models.ForeignKey(
        "labeling.CalibrationSet",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="approvals",
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judge_approvals"
    )
    approved_at = models.DateTimeField(default=timezone.now)
    figures = models.JSONField(default=dict)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="judge_revocations",
    )
    revoke_reason = models.TextField(blank=True)

    objects = JudgeApprovalQuerySet.as_manager()

    class Meta:
        ordering = ["-approved_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge_version"],
                condition=Q(revoked_at__isnull=True),
                name="judge_approval_one_active",
            ),
        ]

    def __str__(self) -> str:
        return f"approval of {self.judge_version_id} by {self.approved_by_id}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
