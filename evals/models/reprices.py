"""Re-pricing a run: the record of each ``manage.py reprice_run`` that changed a cost."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.actors import Via, actor_text
from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from core.money import usd_known_text
from evals.models.runs import Run


def _usd_field() -> models.DecimalField:
    return models.DecimalField(
        max_digits=COST_USD_MAX_DIGITS, decimal_places=COST_USD_DECIMAL_PLACES, null=True
    )


class RunReprice(models.Model):
    """A run's trials (and judge calls) re-priced at the price table of ``created_at``
    (``evals.reprice.run_reprice``). Totals are USD over the costs it looked at: ``*_usd`` the
    known part (null when none was known), ``*_unknown`` how many were null, before and after;
    ``prices``: the price entries used (``providers.pricing.Price.as_json``, null for a model
    without one)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="reprices")
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    via = models.CharField(max_length=10, choices=Via.choices, default=Via.COMMAND)
    created_at = models.DateTimeField(auto_now_add=True)
    old_usd = _usd_field()
    old_unknown = models.PositiveIntegerField()
    new_usd = _usd_field()
    new_unknown = models.PositiveIntegerField()
    trials_changed = models.PositiveIntegerField()
    judge_calls_changed = models.PositiveIntegerField(default=0)
    prices = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"re-pricing of run {self.run_id} ({self.trials_changed} trials)"

    @property
    def old_text(self) -> str:
        """The total before, for a person ("unknown (12 costs unknown)", never $0)."""
        return usd_known_text(self.old_usd, self.old_unknown)

    @property
    def new_text(self) -> str:
        """The total after, for a person (``core.money.usd_known_text``)."""
        return usd_known_text(self.new_usd, self.new_unknown)

    @property
    def actor_text(self) -> str:
        """Who re-priced ("by carol", "from the command line")."""
        return actor_text(by=self.by, via=self.via)
