"""Reading an Anthropic Messages answer: the ``text`` content blocks joined, ``usage``'s
``input_tokens`` and ``output_tokens``, the model; the whole body kept as the raw response
(``stop_reason``, the cache token counts). Error kinds are ``providers.answers``' (a 529
``overloaded_error`` is ``server_error 529``, retried); a 400 saying ``<name>: Extra inputs are
not permitted`` is ``rejected_parameter`` naming ``<name>``."""

from __future__ import annotations

import re
from typing import Any

from providers import answers
from providers.answers import (
    REJECTED_PARAMETER_STATUSES,
    Attempt,
    answered,
    error_body_excerpt,
    errored,
    malformed_raw,
    rejected_parameter_name,
)
from providers.reply import ProviderReply
from providers.transport import HttpAnswer

# "temperatur: Extra inputs are not permitted" (a pydantic error with its location first).
_EXTRA_INPUT = re.compile(
    r"^\s*([A-Za-z_][\w.\-\[\]]*)\s*:\s*extra inputs are not permitted", re.IGNORECASE
)


def answer_read(response: HttpAnswer, *, model: str) -> Attempt:
    """What ``response`` says (``providers.answers.answer_read``, a 200 read by
    ``message_read``)."""
    return answers.answer_read(
        response,
        model=model,
        reply_read=lambda body, text: message_read(body, text, model=model),
        parameter_name=parameter_name,
    )


def parameter_name(status: int, body: Any, message: str) -> str | None:
    """The parameter a 400 refuses: the location before ``: Extra inputs are not permitted``,
    else as ``providers.answers.rejected_parameter_name``; a name under ``messages`` is one
    case's content: None."""
    match = _EXTRA_INPUT.match(message) if status in REJECTED_PARAMETER_STATUSES else None
    if match is None:
        return rejected_parameter_name(status, body, message)
    name = match.group(1)
    return None if name.startswith("messages") else name


def message_read(body: Any, text: str, *, model: str) -> ProviderReply:
    """A 200's text blocks joined, or ``malformed_response`` naming what is missing (no text
    says the ``stop_reason``)."""
    if not isinstance(body, dict):
        raw = {"status": 200, "body": error_body_excerpt(None, text)}
        return errored("malformed_response", "the 200 body is not a JSON object", raw, model)
    content = body.get("content")
    if not isinstance(content, list):
        raw = malformed_raw(body, text)
        return errored("malformed_response", "the reply has no content", raw, model)
    output = "".join(
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )
    if not output:
        stop = body.get("stop_reason")
        why = f"no text (stop_reason {stop!r:.60})" if isinstance(stop, str) else "no text"
        raw = malformed_raw(body, text)
        return errored("malformed_response", f"the reply has {why}", raw, model)
    return answered(body, output, model=model, tokens=("input_tokens", "output_tokens"))
