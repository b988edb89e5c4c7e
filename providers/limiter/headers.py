"""A provider's rate-limit headers as an ``Outcome``: OpenAI's ``x-ratelimit-*`` (limits per
minute, remaining, resets as ``6m0s``; platform.openai.com/docs/guides/rate-limits), else
Anthropic's ``anthropic-ratelimit-requests-*`` / ``-tokens-*`` (limits per minute, remaining,
resets as RFC 3339 times; docs.anthropic.com/en/api/rate-limits). On a 429 ``retry-after-ms``
wins over ``Retry-After``, as in openai-python."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime

from providers.limiter.rules import Outcome

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_seconds(value: str | None) -> float | None:
    """Seconds in a Go-style duration (``6m0s``, ``20ms``) or a bare number; None when unreadable;
    never negative."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def retry_after_ms_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` in seconds, None when absent or unreadable."""
    value = headers.get("retry-after-ms")
    try:
        return max(0.0, float(value) / 1000.0) if value else None
    except ValueError:
        return None


def rfc3339_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from ``now`` (epoch seconds, default the clock) until an RFC 3339 time such as
    ``2026-12-07T10:00:30Z``; None when unreadable or without a zone; never negative."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(headers: Mapping[str, str], name: str) -> float | None:
    value = headers.get(name)
    try:
        number = float(value) if value else None
    except ValueError:
        return None
    return number if number is not None and number >= 0 else None


def outcome_read(
    headers: Mapping[str, str],
    *,
    limited: bool,
    retry_after_s: float | None,
    tokens_delta: float = 0.0,
) -> Outcome:
    """The ``Outcome`` of an answered attempt; ``tokens_delta``: real tokens minus the estimate."""
    pause = None
    if limited:
        pause = retry_after_ms_seconds(headers)
        pause = retry_after_s if pause is None else pause
    requests = _announced(headers, "requests")
    tokens = _announced(headers, "tokens")
    return Outcome(
        limited=limited,
        retry_after_s=pause,
        rpm_limit=requests[0],
        tpm_limit=tokens[0],
        remaining_requests=requests[1],
        reset_requests_s=requests[2],
        remaining_tokens=tokens[1],
        reset_tokens_s=tokens[2],
        tokens_delta=tokens_delta,
    )


def _announced(
    headers: Mapping[str, str], what: str
) -> tuple[float | None, float | None, float | None]:
    """``(limit per minute, remaining, seconds to reset)`` of ``what`` (``requests`` or
    ``tokens``), each from OpenAI's header when sent, else from Anthropic's."""
    limit = _number(headers, f"x-ratelimit-limit-{what}")
    remaining = _number(headers, f"x-ratelimit-remaining-{what}")
    reset = duration_seconds(headers.get(f"x-ratelimit-reset-{what}"))
    anthropic = f"anthropic-ratelimit-{what}"
    if limit is None:
        limit = _number(headers, f"{anthropic}-limit")
    if remaining is None:
        remaining = _number(headers, f"{anthropic}-remaining")
    if reset is None:
        reset = rfc3339_seconds(headers.get(f"{anthropic}-reset"))
    return limit, remaining, reset
