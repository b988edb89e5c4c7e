"""Model prices and trial cost, in exact Decimal USD.

A project override (``ModelPrice``) that matches wins over every built-in match. Within a
source: the exact name, else the longest ``prefix*`` pattern (``gpt-4o-mini*`` beats
``gpt-4o*``), case-sensitive, never fuzzy. An unknown price or token count gives None,
never zero."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from providers.models import ModelPrice

PriceSource = Literal["project override", "built-in"]
SOURCE_OVERRIDE: PriceSource = "project override"
SOURCE_BUILTIN: PriceSource = "built-in"
TOKENS_PER_MTOK = Decimal(1_000_000)

# USD per 1M tokens (input, output), list prices as published by the providers, checked
# 2026-11. Anything not here needs a project override (admin: "model prices").
BUILTIN_PRICES: dict[str, tuple[Decimal, Decimal]] = {
    "gpt-4o": (Decimal("2.50"), Decimal("10.00")),
    "gpt-4o-2024-08-06": (Decimal("2.50"), Decimal("10.00")),
    "gpt-4o-mini*": (Decimal("0.15"), Decimal("0.60")),
    "gpt-4.1": (Decimal("2.00"), Decimal("8.00")),
    "gpt-4.1-mini*": (Decimal("0.40"), Decimal("1.60")),
    "gpt-4.1-nano*": (Decimal("0.10"), Decimal("0.40")),
    "o3-mini*": (Decimal("1.10"), Decimal("4.40")),
    "claude-3-5-haiku*": (Decimal("0.80"), Decimal("4.00")),
    "claude-sonnet-4*": (Decimal("3.00"), Decimal("15.00")),
    "claude-opus-4*": (Decimal("15.00"), Decimal("75.00")),
    # A fixed fictional model for tests and the demo.
    "example-model-1.5": (Decimal("0.35"), Decimal("1.05")),
}


@dataclass(frozen=True)
class Price:
    """USD per 1M input and output tokens, ``source`` ("project override" | "built-in") and the
    matching ``pattern``."""

    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    source: PriceSource
    pattern: str


@dataclass(frozen=True)
class CostBreakdown:
    """``input_usd + output_usd == total_usd``, exact Decimals, with the price used."""

    input_usd: Decimal
    output_usd: Decimal
    total_usd: Decimal
    price: Price

    @property
    def source(self) -> PriceSource:
        return self.price.source


def name_match(model: str, names: Iterable[str]) -> str | None:
    """The entry of ``names`` pricing ``model`` (exact, else longest ``prefix*``), or None."""
    candidates = list(names)
    if model in candidates:
        return model
    best: str | None = None
    for name in candidates:
        is_prefix = name.endswith("*") and model.startswith(name[:-1])
        if is_prefix and (best is None or len(name) > len(best)):
            best = name
    return best


def _override_prices(model: str) -> Mapping[str, tuple[Decimal, Decimal]]:
    """Override rows that could match ``model`` (exact or any pattern), one query."""

    rows = ModelPrice.objects.filter(model__endswith="*") | ModelPrice.objects.filter(model=model)
    return {
        row.model: (row.input_usd_per_mtok, row.output_usd_per_mtok)
        for row in rows.only("model", "input_usd_per_mtok", "output_usd_per_mtok")
    }


def price_lookup(model: str | None) -> Price | None:
    """The price of ``model`` with its source, or None. One query of ``ModelPrice``."""
    if not model:
        return None
    sources: tuple[tuple[PriceSource, Mapping[str, tuple[Decimal, Decimal]]], ...] = (
        (SOURCE_OVERRIDE, _override_prices(model)),
        (SOURCE_BUILTIN, BUILTIN_PRICES),
    )
    for source, table in sources:
        name = name_match(model, table)
        if name is not None:
            input_price, output_price = table[name]
            return Price(
                input_usd_per_mtok=Decimal(input_price),
                output_usd_per_mtok=Decimal(output_price),
                source=source,
                pattern=name,
            )
    return None


def _check_tokens(field: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field}: expected a non-negative integer or None, got {value!r}")


def trial_cost_breakdown(
    model: str | None, input_tokens: int | None, output_tokens: int | None
) -> CostBreakdown | None:
    """Cost of one trial: tokens × USD per 1M tokens / 10^6 for input and output, exact Decimal;
    None when the price or a count is unknown. Raises ``ValueError`` naming the field for a
    negative or non-integer count."""
    _check_tokens("input_tokens", input_tokens)
    _check_tokens("output_tokens", output_tokens)
    if input_tokens is None or output_tokens is None:
        return None
    return cost_breakdown(price_lookup(model), input_tokens, output_tokens)


def cost_breakdown(
    price: Price | None, input_tokens: int | None, output_tokens: int | None
) -> CostBreakdown | None:
    """``trial_cost_breakdown`` at a price already looked up (once per chunk)."""
    if price is None or input_tokens is None or output_tokens is None:
        return None
    _check_tokens("input_tokens", input_tokens)
    _check_tokens("output_tokens", output_tokens)
    input_usd = Decimal(input_tokens) * price.input_usd_per_mtok / TOKENS_PER_MTOK
    output_usd = Decimal(output_tokens) * price.output_usd_per_mtok / TOKENS_PER_MTOK
    return CostBreakdown(
        input_usd=input_usd, output_usd=output_usd, total_usd=input_usd + output_usd, price=price
    )


def trial_cost(
    model: str | None, input_tokens: int | None, output_tokens: int | None
) -> tuple[Decimal | None, PriceSource | None]:
    """``(cost USD, price source)``, or ``(None, None)`` when unknown (``trial_cost_breakdown``)."""
    breakdown = trial_cost_breakdown(model, input_tokens, output_tokens)
    if breakdown is None:
        return None, None
    return breakdown.total_usd, breakdown.source
