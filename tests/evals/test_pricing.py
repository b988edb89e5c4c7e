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
    usage_cost,
)
from providers.usage import Usage


def _io(input_tokens: int | None, output_tokens: int | None) -> Usage:
    """Input and output only, the other classes unknown (none priced for these models)."""
    return Usage(input=input_tokens, output=output_tokens)


def _override(model: str, input_price: str, output_price: str) -> ModelPrice:
    return ModelPrice.objects.create(
        model=model,
        input_usd_per_mtok=Decimal(input_price),
        output_usd_per_mtok=Decimal(output_price),
    )


@pytest.mark.django_db
def test_it_prices_a_trial_with_the_project_override_then_the_builtin_once_deleted():
    override = _override("example-model-1.5", "0.70", "2.10")

    cost, source = trial_cost("example-model-1.5", _io(10_000, 2_000))
    assert cost == Decimal("0.0112")
    assert isinstance(cost, Decimal)
    assert source == "project override"
    costing = usage_cost(
        price_lookup("example-model-1.5"), _io(10_000, 2_000), model="example-model-1.5"
    )
    assert costing.source == "project override"
    assert costing.class_usd == {"input": Decimal("0.007"), "output": Decimal("0.0042")}

    override.delete()
    cost, source = trial_cost("example-model-1.5", _io(10_000, 2_000))
    assert cost == Decimal("0.0056")
    assert source == "built-in"


@pytest.mark.django_db
def test_it_gives_no_price_to_a_suffixed_name_without_a_pattern():
    assert BUILTIN_PRICES["example-model-1.5"][:2] == (Decimal("0.35"), Decimal("1.05"))
    assert price_lookup("example-model-1.5-002") is None
    assert trial_cost("example-model-1.5-002", _io(10_000, 2_000)) == (None, None)


@pytest.mark.django_db
def test_it_prices_a_suffixed_name_through_an_override_pattern():
    _override("example-model-1.5*", "0.50", "1.50")

    price = price_lookup("example-model-1.5-002")
    assert price.source == "project override"
    assert price.pattern == "example-model-1.5*"
    assert trial_cost("example-model-1.5-002", _io(10_000, 2_000)) == (
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
    assert trial_cost("no-such-model", _io(10, 10)) == (None, None)
    assert trial_cost(None, _io(10, 10)) == (None, None)
    assert trial_cost("example-model-1.5", _io(None, 10)) == (None, None)
    assert trial_cost("example-model-1.5", _io(10, None)) == (None, None)
    assert trial_cost("example-model-1.5", _io(0, 0)) == (Decimal("0"), "built-in")


@pytest.mark.django_db
def test_it_refuses_a_negative_token_count_naming_the_field():
    with pytest.raises(ValueError, match="output_tokens"):
        trial_cost("example-model-1.5", _io(10, -1))


# Token classes: each expected cost below is worked by hand from the table's USD per 1M tokens.


@pytest.mark.django_db
def test_it_prices_every_anthropic_class_at_its_own_rate():
    usage = Usage(input=1_000, output=500, cache_write=2_000, cache_read=10_000)
    costing = usage_cost(
        price_lookup("claude-sonnet-4-5-20250929"), usage, model="claude-sonnet-4-5-20250929"
    )
    # 1000 x 3.00 + 500 x 15.00 + 2000 x 3.75 + 10000 x 0.30, per 1M tokens
    assert costing.class_usd == {
        "input": Decimal("0.003"),
        "output": Decimal("0.0075"),
        "cache_write": Decimal("0.0075"),
        "cache_read": Decimal("0.003"),
    }
    assert costing.total_usd == Decimal("0.021")
    assert costing.basis() == {
        "model": "claude-sonnet-4-5-20250929",
        "price": "claude-sonnet-4-5*",
        "source": "built-in",
        "classes": ["input", "output", "cache_write", "cache_read"],
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("model", "one_token_each_usd"),
    [
        # input + output + 5-minute cache write + cache read, USD per 1M tokens
        ("claude-3-5-haiku-20241022", Decimal("0.00000588")),  # 0.80 + 4 + 1 + 0.08
        ("claude-haiku-4-5-20251001", Decimal("0.00000735")),  # 1 + 5 + 1.25 + 0.10
        ("claude-sonnet-4-20250514", Decimal("0.00002205")),  # 3 + 15 + 3.75 + 0.30
        ("claude-sonnet-4-0", Decimal("0.00002205")),
        ("claude-opus-4-20250514", Decimal("0.00011025")),  # 15 + 75 + 18.75 + 1.50
        ("claude-opus-4-1-20250805", Decimal("0.00011025")),
        ("claude-opus-4-5-20251101", Decimal("0.00003675")),  # 5 + 25 + 6.25 + 0.50
    ],
)
def test_it_holds_the_current_claude_prices(model, one_token_each_usd):
    usage = Usage(input=1, output=1, cache_write=1, cache_read=1)
    assert trial_cost(model, usage) == (one_token_each_usd, "built-in")


@pytest.mark.django_db
def test_it_gives_no_claude_price_to_a_model_it_does_not_list():
    assert price_lookup("claude-opus-4-6") is None
    assert price_lookup("claude-sonnet-5") is None


@pytest.mark.django_db
def test_it_prices_openai_cached_input_and_o_series_reasoning_at_the_output_rate():
    cached = Usage(input=800, output=100, cache_read=1_200, reasoning=0)
    # 800 x 2.50 + 100 x 10.00 + 1200 x 1.25, per 1M tokens
    assert trial_cost("gpt-4o", cached) == (Decimal("0.0045"), "built-in")
    reasoning = Usage(input=1_000, output=200, cache_read=0, reasoning=3_000)
    # 1000 x 1.10 + 200 x 4.40 + 3000 x 4.40 (reasoning billed as output), per 1M tokens
    assert trial_cost("o3-mini-2025-01-31", reasoning) == (Decimal("0.01518"), "built-in")
    assert price_lookup("o3-mini").reasoning_usd_per_mtok == Decimal("4.40")
    assert price_lookup("gpt-4o").reasoning_usd_per_mtok is None


@pytest.mark.django_db
def test_every_builtin_entry_names_its_pricing_page_and_the_date_checked():
    for name, entry in BUILTIN_PRICES.items():
        if name == "example-model-1.5":
            continue
        assert entry.source.startswith("https://"), name
        assert entry.checked == "2026-12-07", name


@pytest.mark.django_db
def test_a_used_class_without_a_price_makes_the_cost_unknown_saying_which():
    costing = usage_cost(
        price_lookup("gpt-4o"),
        Usage(input=10, output=10, cache_read=0, reasoning=5),
        model="gpt-4o",
    )
    assert costing.total_usd is None
    assert costing.unknown == ("reasoning has no price for gpt-4o",)
    assert costing.basis()["unknown"] == ["reasoning has no price for gpt-4o"]
    # A class at zero costs nothing, priced or not.
    assert trial_cost("example-model-1.5", Usage(input=10, output=0, cache_read=0)) == (
        Decimal("0.0000035"),
        "built-in",
    )
    assert trial_cost("example-model-1.5", Usage(input=10, output=0, cache_read=5)) == (None, None)


@pytest.mark.django_db
def test_an_unreported_count_of_a_priced_class_makes_the_cost_unknown():
    costing = usage_cost(
        price_lookup("claude-sonnet-4-5"),
        Usage(input=10, output=10, cache_write=0),
        model="claude-sonnet-4-5",
    )
    assert costing.total_usd is None
    assert costing.unknown == ("cache_read tokens not reported for claude-sonnet-4-5",)
    # Unreported and unpriced (OpenAI reports no cache write): nothing to count.
    assert trial_cost("gpt-4o", Usage(input=10, output=10, cache_read=0, reasoning=0)) == (
        Decimal("0.000125"),
        "built-in",
    )


@pytest.mark.django_db
def test_an_override_prices_the_classes_it_has_and_no_other():
    ModelPrice.objects.create(
        model="acme-cache*",
        input_usd_per_mtok=Decimal("2"),
        output_usd_per_mtok=Decimal("8"),
        cache_read_usd_per_mtok=Decimal("0.2"),
    )
    usage = Usage(input=1_000, output=1_000, cache_read=5_000, reasoning=0)
    # 1000 x 2 + 1000 x 8 + 5000 x 0.2, per 1M tokens
    assert trial_cost("acme-cache-1", usage) == (Decimal("0.011"), "project override")
    assert trial_cost("acme-cache-1", Usage(input=1, output=1, cache_write=1)) == (None, None)
