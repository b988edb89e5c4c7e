"""Token classes: what one call (or a trial's calls, summed) used, in five disjoint counts.

A count is a non-negative int the provider stated, or None when its answer did not say
(unknown, never zero). The classes are disjoint, so a cost sums each class once
(``providers.pricing``):

- ``input``: prompt tokens billed at the input rate, i.e. neither written to nor read from a
  cache. OpenAI: ``prompt_tokens`` − ``prompt_tokens_details.cached_tokens`` (all of
  ``prompt_tokens`` when the details are absent: ``cache_read`` is then unknown). Anthropic:
  ``input_tokens`` (which already excludes both cache counts).
- ``cache_write``: prompt tokens written to a cache. Anthropic: ``cache_creation_input_tokens``
  (5-minute writes; a 1-hour write, ``cache_creation.ephemeral_1h_input_tokens`` > 0, is priced
  at another rate, so the class is then unknown). OpenAI reports none (its writes are free):
  None.
- ``cache_read``: prompt tokens read from a cache. OpenAI:
  ``prompt_tokens_details.cached_tokens``; Anthropic: ``cache_read_input_tokens``.
- ``output``: completion tokens that are not reasoning. OpenAI: ``completion_tokens`` −
  ``completion_tokens_details.reasoning_tokens`` (all of ``completion_tokens`` when the details
  are absent); Anthropic: ``output_tokens`` (its thinking is billed, and counted, inside it).
- ``reasoning``: OpenAI's ``completion_tokens_details.reasoning_tokens``; None for Anthropic,
  which does not report it apart.

A detail larger than the total it belongs to is a contradiction: both counts are then
unknown. docs/costs.md has the same table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

TokenClass = Literal["input", "output", "cache_write", "cache_read", "reasoning"]
TOKEN_CLASSES: tuple[TokenClass, ...] = (
    "input",
    "output",
    "cache_write",
    "cache_read",
    "reasoning",
)
# The classes beyond input and output, under a trial's field names (exports, run files).
EXTRA_TOKEN_FIELDS: tuple[str, ...] = (
    "cache_write_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
)


@dataclass(frozen=True)
class Usage:
    """Tokens by class (module docstring), each a non-negative int or None (unknown)."""

    input: int | None = None
    output: int | None = None
    cache_write: int | None = None
    cache_read: int | None = None
    reasoning: int | None = None

    def count(self, token_class: TokenClass) -> int | None:
        """The count of ``token_class``."""
        value: int | None = getattr(self, token_class)
        return value

    def plus(self, other: Usage) -> Usage:
        """The sum class by class; a class unknown in either is unknown."""
        return Usage(
            input=_plus(self.input, other.input),
            output=_plus(self.output, other.output),
            cache_write=_plus(self.cache_write, other.cache_write),
            cache_read=_plus(self.cache_read, other.cache_read),
            reasoning=_plus(self.reasoning, other.reasoning),
        )


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


ZERO = Usage(input=0, output=0, cache_write=0, cache_read=0, reasoning=0)


class UsageTokens(TypedDict):
    """The classes under the field names of a reply, a result, a trial and a judge call."""

    input_tokens: int | None
    output_tokens: int | None
    cache_write_tokens: int | None
    cache_read_tokens: int | None
    reasoning_tokens: int | None


def usage_of(source: Any) -> Usage:
    """The classes held by any object with ``input_tokens``, ``output_tokens``,
    ``cache_write_tokens``, ``cache_read_tokens`` and ``reasoning_tokens`` attributes (a
    provider reply, a target result, a trial, a judge reply); a missing attribute is unknown."""
    return Usage(
        input=getattr(source, "input_tokens", None),
        output=getattr(source, "output_tokens", None),
        cache_write=getattr(source, "cache_write_tokens", None),
        cache_read=getattr(source, "cache_read_tokens", None),
        reasoning=getattr(source, "reasoning_tokens", None),
    )


def usage_tokens(usage: Usage) -> UsageTokens:
    """``usage`` under the field names (``UsageTokens``), to pass as keywords."""
    return UsageTokens(
        input_tokens=usage.input,
        output_tokens=usage.output,
        cache_write_tokens=usage.cache_write,
        cache_read_tokens=usage.cache_read,
        reasoning_tokens=usage.reasoning,
    )


def count(value: Any) -> int | None:
    """A token count from an answer's ``usage``: a non-negative int, else None (unknown)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _details(usage: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = usage.get(key)
    return value if isinstance(value, dict) else {}


def _split(total: int | None, part: int | None) -> tuple[int | None, int | None]:
    """``(total − part, part)``; ``part`` unknown: ``(total, None)``; a part over the total: both
    unknown."""
    if total is None:
        return None, part
    if part is None:
        return total, None
    if part > total:
        return None, None
    return total - part, part


def openai_usage(usage: Any) -> Usage:
    """The classes of an OpenAI chat completion's ``usage`` (module docstring)."""
    usage = usage if isinstance(usage, dict) else {}
    cached = count(_details(usage, "prompt_tokens_details").get("cached_tokens"))
    reasoning = count(_details(usage, "completion_tokens_details").get("reasoning_tokens"))
    uncached, cache_read = _split(count(usage.get("prompt_tokens")), cached)
    output, reasoning = _split(count(usage.get("completion_tokens")), reasoning)
    return Usage(input=uncached, output=output, cache_read=cache_read, reasoning=reasoning)


def anthropic_usage(usage: Any) -> Usage:
    """The classes of an Anthropic message's ``usage`` (module docstring)."""
    usage = usage if isinstance(usage, dict) else {}
    cache_write = count(usage.get("cache_creation_input_tokens"))
    one_hour = count(_details(usage, "cache_creation").get("ephemeral_1h_input_tokens"))
    if one_hour:  # priced at 2 x input, not the 5-minute rate the table holds
        cache_write = None
    return Usage(
        input=count(usage.get("input_tokens")),
        output=count(usage.get("output_tokens")),
        cache_write=cache_write,
        cache_read=count(usage.get("cache_read_input_tokens")),
    )
