"""Reading an OpenAI-compatible chat completion: its first choice's content, ``usage`` and
model; the error kinds and their reading are ``providers.answers``'s."""

from __future__ import annotations

from typing import Any

from providers import answers
from providers.answers import (
    Attempt,
    answered,
    error_body_excerpt,
    errored,
    malformed_raw,
    utf8_prefix,
)
from providers.reply import ProviderReply
from providers.transport import HttpAnswer
from providers.usage import openai_usage


def answer_read(response: HttpAnswer, *, model: str, tools: bool = False) -> Attempt:
    """What ``response`` says; ``tools``: a reply with ``tool_calls`` and no text is an answer."""
    return answers.answer_read(
        response,
        model=model,
        reply_read=lambda body, text: completion_read(body, text, model=model, tools=tools),
    )


def completion_read(body: Any, text: str, *, model: str, tools: bool = False) -> ProviderReply:
    """A 200's first choice's content, or ``malformed_response`` naming what is missing."""
    if not isinstance(body, dict):
        raw = {"status": 200, "body": error_body_excerpt(None, text)}
        return errored("malformed_response", "the 200 body is not a JSON object", raw, model)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raw = malformed_raw(body, text)
        return errored("malformed_response", "the reply has no choices", raw, model)
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if tools and isinstance(calls, list) and calls:
        content = content if isinstance(content, str) else ""  # the calls are the answer
    elif not isinstance(content, str) or not content:
        refusal = message.get("refusal") if isinstance(message, dict) else None
        why = f"refusal: {refusal}" if isinstance(refusal, str) and refusal else "empty content"
        raw = malformed_raw(body, text)
        return errored("malformed_response", utf8_prefix(f"the reply has {why}"), raw, model)
    return answered(body, content, model=model, usage_read=openai_usage)
