"""What one call to a model endpoint came back with (``ProviderReply``), as storable text."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core.text import REPLACED_KEY, unstorable_replace


@dataclass(frozen=True)
class ProviderReply:
    """One call's outcome over all attempts. ``output``: text ("" on error); ``raw_response``: the
    JSON-safe body or error excerpt, None when nothing came; ``error``: ``"<kind>: <words>"``
    (retried: ``"<kind> after <n> attempts: <words>"``) or None; ``error_kind``: a kind of
    ``answers``, or ``cancelled``; tokens: ``usage`` read into the disjoint token classes of
    ``providers.usage`` (``*_tokens``), None when unknown; ``model``: the one
    that answered; ``attempts``: 0 when not sent; ``latency_ms``: wall-clock milliseconds."""

    output: str
    raw_response: Any = None
    error: str | None = None
    error_kind: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
    model: str | None = None
    attempts: int = 1
    latency_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def reply_storable(reply: ProviderReply) -> ProviderReply:
    """``reply`` with U+0000 and lone surrogates as U+FFFD (``core.text``); counts per field under
    ``raw_response[REPLACED_KEY]`` (a non-dict reply kept under ``"reply"``). Clean: the same
    object."""
    output, n_output = unstorable_replace(reply.output)
    raw, n_raw = unstorable_replace(reply.raw_response)
    error, n_error = unstorable_replace(reply.error)
    model, n_model = unstorable_replace(reply.model)
    counts = {"output": n_output, "raw_response": n_raw, "error": n_error, "model": n_model}
    record = {name: n for name, n in counts.items() if n}
    if not record:
        return reply
    if isinstance(raw, dict):
        raw = {**raw, REPLACED_KEY: record}
    else:
        raw = {REPLACED_KEY: record} if raw is None else {"reply": raw, REPLACED_KEY: record}
    return replace(reply, output=output, raw_response=raw, error=error, model=model)
