"""Pruning runs: the record of each run ``manage.py runs_prune`` deleted (or is deleting)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.actors import Via, actor_text
from evals.models.runs import Run
from evals.models.suites import Suite


class RunPrune(models.Model):
    """One run deleted by ``evals.prune.runs_prune``: who, when, via, and what went. Outlives
    the run (``run`` null once its row is gone; ``run_uuid`` and ``run_name`` stay).
    ``finished_at`` null: the prune is under way or was interrupted (the run shows status
    "pruning" and the next prune finishes it). ``trials``, ``grades``: rows deleted;
    ``deleted``: every model's rows deleted, ``{"app.Model": count}``; ``batches``: short
    transactions used; ``status_before``: the run's status when it was marked."""

    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="prunes"
    )
    run_uuid = models.UUIDField(db_index=True)
    run_name = models.CharField(max_length=200)
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="run_prunes")
    status_before = models.CharField(max_length=20)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    via = models.CharField(max_length=10, choices=Via.choices, default=Via.COMMAND)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    trials = models.PositiveIntegerField(default=0)
    grades = models.PositiveIntegerField(default=0)
    deleted = models.JSONField(default=dict, blank=True)
    batches = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"prune of run {self.run_name} ({self.run_uuid})"

    @property
    def actor_text(self) -> str:
        """Who pruned ("by alice", "from the command line")."""
        return actor_text(by=self.by, via=self.via)
