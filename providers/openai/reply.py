"""What one call to a model endpoint came back with (``ProviderReply``), as storable text."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core.text import REPLACED_KEY, unstorable_replace


@dataclass(frozen=True)
class ProviderReply:
    """One call's outcome, over all its attempts.

    ``output``: the reply's text ("" on error); ``raw_response``: the JSON-safe reply body,
    or the error's (an excerpt past 2 KB: ``answers.error_body_excerpt``), None when nothing
    came back; ``error``: None on success, else ``"<error_kind>: <the provider's words>"``
    (a retried failure: ``"<kind> after <n> attempts: <words>"``); ``error_kind``:
    ``rate_limited``, ``server_error <status>``, ``timeout``, ``connection_error``,
    ``rejected_parameter``, ``client_error <status>``, ``malformed_response`` or
    ``cancelled``, None on success; ``input_tokens`` / ``output_tokens``: the answer's
    ``usage``, None when unknown; ``model``: the model that answered (the one asked when
    the answer does not say); ``attempts``: HTTP attempts made (0: not sent);
    ``latency_ms``: wall-clock milliseconds over every attempt and wait.
    """

    output: str
    raw_response: Any = None
    error: str | None = None
    error_kind: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    attempts: int = 1
    latency_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def reply_storable(reply: ProviderReply) -> ProviderReply:
    """``reply`` with every U+0000 and lone surrogate of its text (``output``,
    ``raw_response``, ``error``, ``model``) replaced by U+FFFD (``core.text``'s replace
    policy); when any was, ``raw_response`` is a dict holding ``{REPLACED_KEY: {field:
    characters replaced}}`` for the fields that had some (a reply that was not a dict is kept
    under ``"reply"``). A clean reply comes back unchanged (the same object)."""
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
