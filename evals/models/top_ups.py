"""Top-ups: more trials added in rounds to settle a comparison's suspect cases."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from evals.models.runs import Run


class TopUp(models.Model):
    """Settling a comparison's suspect cases with more trials (``evals.comparison.topup``).

    Trials are added in rounds to ``head`` (and ``base`` when ``base_replayed``), marked with
    ``Trial.top_up``/``top_up_round``. ``plan``: the design fixed at start
    (``stats.sequential.TopUpPlan``); ``decision``: the gate's JSON once ended; ``adaptive``:
    from ``run_suite --against``; caps ``max_trials_per_case`` a side, ``max_cost_usd`` (USD)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SETTLED = "settled", "settled"
        CAPPED = "capped", "stopped at a cap"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    TERMINAL = (Status.SETTLED, Status.CAPPED, Status.FAILED, Status.CANCELLED)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    base = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="top_ups_as_base")
    head = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="top_ups_as_head")
    alpha = models.FloatField(default=0.05)
    plan = models.JSONField(default=dict)
    base_replayed = models.BooleanField(default=True)
    adaptive = models.BooleanField(default=False)
    max_trials_per_case = models.PositiveIntegerField()
    max_cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    rounds_done = models.PositiveSmallIntegerField(default=0)
    trials_added = models.PositiveIntegerField(default=0)
    decision = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"top-up of {self.head_id} against {self.base_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL
