"""Token classes read from each provider's ``usage``: disjoint counts, unknown as None."""

from __future__ import annotations

from providers.usage import ZERO, Usage, anthropic_usage, openai_usage


def test_it_takes_openai_cached_and_reasoning_tokens_out_of_their_totals():
    usage = openai_usage(
        {
            "prompt_tokens": 2_000,
            "completion_tokens": 3_200,
            "prompt_tokens_details": {"cached_tokens": 1_200, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 3_000},
        }
    )
    assert usage == Usage(input=800, output=200, cache_read=1_200, reasoning=3_000)


def test_an_openai_usage_without_details_leaves_those_classes_unknown():
    usage = openai_usage({"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17})
    assert usage == Usage(input=12, output=5)
    assert openai_usage(None) == Usage()
    assert openai_usage({"prompt_tokens": -1, "completion_tokens": True}) == Usage()


def test_a_detail_larger_than_its_total_makes_both_unknown():
    usage = openai_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 11},
            "completion_tokens_details": {"reasoning_tokens": 10},
        }
    )
    assert usage == Usage(input=None, output=0, cache_read=None, reasoning=10)


def test_it_reads_anthropic_cache_counts_beside_the_input_they_are_not_part_of():
    usage = anthropic_usage(
        {
            "input_tokens": 50,
            "output_tokens": 400,
            "cache_creation_input_tokens": 2_000,
            "cache_read_input_tokens": 10_000,
        }
    )
    assert usage == Usage(input=50, output=400, cache_write=2_000, cache_read=10_000)
    # Absent cache fields: unknown, not zero.
    assert anthropic_usage({"input_tokens": 5, "output_tokens": 6}) == Usage(input=5, output=6)


def test_a_one_hour_cache_write_is_not_priced_as_a_five_minute_one():
    usage = anthropic_usage(
        {
            "input_tokens": 5,
            "output_tokens": 6,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 40, "ephemeral_1h_input_tokens": 60},
        }
    )
    assert usage.cache_write is None
    assert usage.cache_read == 0


def test_sums_keep_unknown_unknown():
    a = Usage(input=1, output=2, cache_write=0, cache_read=3, reasoning=None)
    b = Usage(input=10, output=20, cache_write=5, cache_read=None, reasoning=None)
    assert a.plus(b) == Usage(input=11, output=22, cache_write=5)
    assert ZERO.plus(a) == a
