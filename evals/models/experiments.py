"""Experiments: one suite, several variants (targets) started together, each variant a run,
and the question "which variant could be the best, at what cost" (``evals.experiments``)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from evals.models.runs import Run
from evals.models.suites import Suite


class Experiment(models.Model):
    """Variants of one suite started together with one grader set and trials per case.

    ``alpha``: 1 − the confidence of the best set (``stats.best_set``); ``metric``:
    ``pass_rate`` or ``pass_hat_k`` (with ``k``); ``seed``: given to every variant whose target
    takes one and names none (the simulated target's ``seed``, a model target's
    ``seed_per_trial``), so trials of a case and attempt share their seed across variants;
    ``racing``: the settle design fixed at start (``stats.racing.RacingPlan.to_json``), ``{}``
    until settling is asked; ``racing_look``: the looks decided so far."""

    class Metric(models.TextChoices):
        PASS_RATE = "pass_rate", "pass rate"
        PASS_HAT_K = "pass_hat_k", "pass^k"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="experiments")
    name = models.CharField(max_length=200)
    alpha = models.FloatField(default=0.05)
    metric = models.CharField(max_length=12, choices=Metric.choices, default=Metric.PASS_RATE)
    k = models.PositiveSmallIntegerField(default=1)
    trials_per_case = models.PositiveIntegerField()
    seed = models.BigIntegerField(null=True, blank=True)
    racing = models.JSONField(default=dict, blank=True)
    racing_look = models.PositiveSmallIntegerField(default=0)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "name"], name="experiment_unique_name_per_suite"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite.name} / {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("evals:experiment-detail", kwargs={"experiment_id": self.uuid})

    @property
    def ref_text(self) -> str:
        """ "prompts (<uuid>)": the experiment's name and public UUID; no query."""
        return f"{self.name} ({self.uuid})"


class ExperimentVariant(models.Model):
    """One variant of an experiment: its run (one run belongs to at most one experiment), its
    ``label`` (unique in the experiment) and ``position`` (0-based, the order it was given)."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="variants")
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="experiment_variant")
    label = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["experiment_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "position"], name="experiment_variant_unique_position"
            ),
            models.UniqueConstraint(
                fields=["experiment", "label"], name="experiment_variant_unique_label"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.run_id})"
