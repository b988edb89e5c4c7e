"""Prices and trial cost: override precedence, the name-matching rule, exact Decimals (fault G1)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from providers.models import ModelPrice
from providers.pricing import (
    BUILTIN_PRICES,
    name_match,
    price_lookup,
    trial_cost,
    trial_cost_breakdown,
)


def _override(model: str, input_price: str, output_price: str) -> ModelPrice:
    return ModelPrice.objects.create(
        model=model,
        input_usd_per_mtok=Decimal(input_price),
        output_usd_per_mtok=Decimal(output_price),
    )


@pytest.mark.django_db
def test_it_prices_a_trial_with_the_project_override_then_the_builtin_once_deleted():
    override = _override("example-model-1.5", "0.70", "2.10")

    cost, source = trial_cost("example-model-1.5", 10_000, 2_000)
    assert cost == Decimal("0.0112")
    assert isinstance(cost, Decimal)
    assert source == "project override"
    breakdown = trial_cost_breakdown("example-model-1.5", 10_000, 2_000)
    assert breakdown.source == "project override"
    assert breakdown.input_usd == Decimal("0.007")
    assert breakdown.output_usd == Decimal("0.0042")

    override.delete()
    cost, source = trial_cost("example-model-1.5", 10_000, 2_000)
    assert cost == Decimal("0.0056")
    assert source == "built-in"


@pytest.mark.django_db
def test_it_gives_no_price_to_a_suffixed_name_without_a_pattern():
    assert BUILTIN_PRICES["example-model-1.5"] == (Decimal("0.35"), Decimal("1.05"))
    assert price_lookup("example-model-1.5-002") is None
    assert trial_cost("example-model-1.5-002", 10_000, 2_000) == (None, None)


@pytest.mark.django_db
def test_it_prices_a_suffixed_name_through_an_override_pattern():
    _override("example-model-1.5*", "0.50", "1.50")

    price = price_lookup("example-model-1.5-002")
    assert price.source == "project override"
    assert price.pattern == "example-model-1.5*"
    assert trial_cost("example-model-1.5-002", 10_000, 2_000) == (
        Decimal("0.008"),
        "project override",
    )


@pytest.mark.django_db
def test_it_lets_an_override_pattern_beat_a_builtin_exact_name():
    _override("example-*", "1", "1")

    price = price_lookup("example-model-1.5")
    assert price.source == "project override"
    assert price.input_usd_per_mtok == Decimal("1")


@pytest.mark.django_db
def test_it_prefers_the_exact_name_then_the_longest_pattern_within_a_source():
    _override("acme*", "1", "1")
    _override("acme-large*", "2", "2")
    _override("acme-large-v2", "3", "3")

    assert price_lookup("acme-large-v2").pattern == "acme-large-v2"
    assert price_lookup("acme-large-v3").pattern == "acme-large*"
    assert price_lookup("acme-small").pattern == "acme*"
    assert price_lookup("acm") is None


def test_the_matching_rule_is_the_same_function_for_both_sources():
    names = ["gpt-4o", "gpt-4o-mini*", "gpt-4o*"]
    assert name_match("gpt-4o", names) == "gpt-4o"
    assert name_match("gpt-4o-mini-2024-07-18", names) == "gpt-4o-mini*"
    assert name_match("gpt-4o-2024-11-20", names) == "gpt-4o*"
    assert name_match("GPT-4O", names) is None


@pytest.mark.django_db
def test_it_returns_null_not_zero_for_an_unknown_model_or_token_count():
    assert trial_cost("no-such-model", 10, 10) == (None, None)
    assert trial_cost(None, 10, 10) == (None, None)
    assert trial_cost("example-model-1.5", None, 10) == (None, None)
    assert trial_cost("example-model-1.5", 10, None) == (None, None)
    assert trial_cost("example-model-1.5", 0, 0) == (Decimal("0"), "built-in")


@pytest.mark.django_db
def test_it_refuses_a_negative_token_count_naming_the_field():
    with pytest.raises(ValueError, match="output_tokens"):
        trial_cost("example-model-1.5", 10, -1)
