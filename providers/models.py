"""What the project stores about model endpoints: its own prices (``ModelPrice``)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import models
from django.db.models.expressions import Combinable


class ModelPrice(models.Model):
    """A project override of a model's price, USD per million tokens of each token class
    (input and output required, the others null when unpriced); ``model`` is an exact name
    or a ``prefix*`` pattern. Wins over any built-in match (``providers.pricing``)."""

    model: models.CharField[str | int | Combinable, str] = models.CharField(
        max_length=200, unique=True
    )
    input_usd_per_mtok: models.DecimalField[str | float | Decimal | Combinable, Decimal] = (
        models.DecimalField(max_digits=12, decimal_places=6)
    )
    output_usd_per_mtok: models.DecimalField[str | float | Decimal | Combinable, Decimal] = (
        models.DecimalField(max_digits=12, decimal_places=6)
    )
    # The other token classes (``providers.usage``); null: the class is unpriced, so a call
    # using it has an unknown cost.
    cache_write_usd_per_mtok: models.DecimalField[
        str | float | Decimal | Combinable | None, Decimal | None
    ] = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_read_usd_per_mtok: models.DecimalField[
        str | float | Decimal | Combinable | None, Decimal | None
    ] = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    reasoning_usd_per_mtok: models.DecimalField[
        str | float | Decimal | Combinable | None, Decimal | None
    ] = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    note: models.CharField[str | int | Combinable, str] = models.CharField(
        max_length=200, blank=True
    )
    updated_at: models.DateTimeField[str | datetime | Combinable, datetime] = models.DateTimeField(
        auto_now=True
    )

    class Meta:
        # The table keeps the name evals gave it (its rows stayed in place).
        db_table = "evals_modelprice"
        ordering = ["model"]
        verbose_name = "model price (project override)"

    def __str__(self) -> str:
        return self.model
