"""core.money: a known non-zero cost never prints as $0.0000; unknown is "unknown"."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import Context, Template
from hypothesis import given
from hypothesis import strategies as st

from core.money import per_usd_text, usd_known_text, usd_signed_text, usd_text


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (Decimal("0.0000051"), "$0.0000051"),
        (Decimal("0.00000512345"), "$0.0000051"),
        (Decimal("0.0112"), "$0.0112"),
        (Decimal("0.1"), "$0.10"),
        (Decimal("0.29"), "$0.29"),
        (Decimal("0.003"), "$0.0030"),
        (Decimal("0.012345"), "$0.0123"),
        (Decimal("0"), "$0"),
        (Decimal("0E-8"), "$0"),
        (Decimal("1234.5"), "$1,234.50"),
        (Decimal("0.00000001"), "$0.000000010"),
        ("0.00002", "$0.000020"),
        (5.1e-6, "$0.0000051"),
        (None, "unknown"),
    ],
)
def test_it_prints_small_costs_with_significant_digits(amount, text):
    assert usd_text(amount) == text


@given(st.decimals(min_value=Decimal("1e-14"), max_value=Decimal("0.99"), places=14))
def test_a_known_non_zero_cost_never_reads_as_zero(amount):
    text = usd_text(amount)
    assert Decimal(text.removeprefix("$")) > 0


def test_it_signs_differences_and_keeps_unknown():
    assert usd_signed_text(Decimal("0.0000051")) == "+$0.0000051"
    assert usd_signed_text(Decimal("-0.004")) == "−$0.0040"
    assert usd_signed_text(Decimal("0")) == "$0"
    assert usd_signed_text(None) == "unknown"


def test_a_sum_of_unknown_costs_reads_unknown_and_a_partial_one_says_what_is_known():
    assert usd_known_text(None, 12) == "unknown (12 costs unknown)"
    assert usd_known_text(Decimal("0.00012"), 3) == "$0.00012 known, 3 costs unknown"
    assert usd_known_text(Decimal(0), 1) == "$0 known, 1 cost unknown"
    assert usd_known_text(Decimal("0.00063"), 0) == "$0.00063"


def test_it_prints_rates_per_dollar_with_three_significant_digits():
    assert per_usd_text(156862.7) == "157,000 per $"
    assert per_usd_text(412.4) == "412 per $"
    assert per_usd_text(0.04123) == "0.0412 per $"
    assert per_usd_text(None) == "unknown"


def test_the_usd_filter_uses_it_and_never_fails_a_page():
    html = Template("{% load dashboard %}{{ a|usd }} {{ b|usd }} {{ c|usd_signed }}").render(
        Context({"a": Decimal("0.0000051"), "b": None, "c": Decimal("-0.0000051")})
    )
    assert html == "$0.0000051 unknown −$0.0000051"
    assert Template("{% load dashboard %}{{ missing|usd }}").render(Context()) == "unknown"
