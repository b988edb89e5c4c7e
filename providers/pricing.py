"""Model prices and trial cost, in exact Decimal USD.

Precedence (one rule for every caller): a project override (``providers.models.ModelPrice``
rows) first, then ``BUILTIN_PRICES``. If *any* override matches a model name, it wins over
every built-in match, even a built-in exact name against an override pattern.

Name matching (the same for both sources):
1. an entry whose name equals the model name exactly;
2. else the longest entry ending in ``*`` whose text before the ``*`` is a prefix of the
   model name (``gpt-4o-mini*`` beats ``gpt-4o*`` for ``gpt-4o-mini-2024-07-18``);
3. else no price. There is no fuzzy matching: ``example-model-1.5-002`` has no price
   unless some source holds ``example-model-1.5-002`` or a pattern such as
   ``example-model-1.5*``. Names are compared case-sensitively.

Unknown is null, not zero: ``trial_cost`` returns ``(None, None)`` when the model has no
price or a token count is unknown.
"""

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
    """A model's price: USD per 1M input and output tokens, where it came from
    (``source``: "project override" | "built-in") and the entry that matched (``pattern``,
    an exact name or a ``prefix*`` pattern)."""

    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    source: PriceSource
    pattern: str


@dataclass(frozen=True)
class CostBreakdown:
    """A trial's cost in USD: ``input_usd + output_usd == total_usd``, exact Decimals,
    with the price used."""

    input_usd: Decimal
    output_usd: Decimal
    total_usd: Decimal
    price: Price

    @property
    def source(self) -> PriceSource:
        return self.price.source


def name_match(model: str, names: Iterable[str]) -> str | None:
    """The entry of ``names`` that prices ``model`` under the module's matching rule
    (exact name, else the longest ``prefix*`` pattern), or None."""
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
    """The price of ``model`` with its source, or None when no source prices it.

    Project override first (any match wins), then built-in; the matching rule is in the
    module docstring. Reads ``ModelPrice`` (one query).
    """
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
    """Cost of one trial, split by input and output, or None when unknown.

    cost = input_tokens × input_usd_per_mtok / 10^6 + output_tokens × output_usd_per_mtok / 10^6,
    exact Decimal arithmetic (no float). None when the price or either token count is
    unknown. Raises ``ValueError`` naming the field for a negative or non-integer count.
    """
    _check_tokens("input_tokens", input_tokens)
    _check_tokens("output_tokens", output_tokens)
    if input_tokens is None or output_tokens is None:
        return None
    return cost_breakdown(price_lookup(model), input_tokens, output_tokens)


def cost_breakdown(
    price: Price | None, input_tokens: int | None, output_tokens: int | None
) -> CostBreakdown | None:
    """Cost of one trial at a price already looked up (the runner looks a model's price up
    once per chunk); None when the price or a token count is unknown. Same formula as
    ``trial_cost_breakdown``."""
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
    """``(cost in USD, price source)`` of one trial, or ``(None, None)`` when unknown.

    Never zero by default: an unpriced model or an unknown token count gives None.
    See ``trial_cost_breakdown`` for the formula and errors.
    """
    breakdown = trial_cost_breakdown(model, input_tokens, output_tokens)
    if breakdown is None:
        return None, None
    return breakdown.total_usd, breakdown.source
