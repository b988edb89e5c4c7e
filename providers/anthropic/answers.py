"""Reading an Anthropic Messages answer: the ``text`` content blocks joined, ``usage`` in token
classes (``providers.usage.anthropic_usage``: input, output, the two cache counts), the model;
the whole body kept as the raw response (``stop_reason``). A call forcing a tool (``tool_choice``
``{"type": "tool", "name"}``) is answered by that tool's ``tool_use`` block: its ``input``, an
object, as JSON text (no such block, or a key twice anywhere in the body, is
``malformed_response``). A call declaring tools (the tool loop) may be answered by ``tool_use``
blocks without text: its output is then empty (the loop reads the blocks from the raw
response). Error kinds are ``providers.answers``' (a 529 ``overloaded_error`` is ``server_error
529``, retried); a 400 saying ``<name>: Extra inputs are not permitted`` is
``rejected_parameter`` naming ``<name>``."""

from __future__ import annotations

import json
import re
from typing import Any

from core.strict_json import no_duplicate_keys
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
from providers.usage import anthropic_usage

# "temperatur: Extra inputs are not permitted" (a pydantic error with its location first).
_EXTRA_INPUT = re.compile(
    r"^\s*([A-Za-z_][\w.\-\[\]]*)\s*:\s*extra inputs are not permitted", re.IGNORECASE
)


def answer_read(
    response: HttpAnswer, *, model: str, tool: str | None = None, tools: bool = False
) -> Attempt:
    """What ``response`` says (``providers.answers.answer_read``, a 200 read by
    ``message_read``); ``tool``: the tool the call forces, None for a text answer; ``tools``:
    the call declares tools, so ``tool_use`` blocks without text are an answer."""
    return answers.answer_read(
        response,
        model=model,
        reply_read=lambda body, text: message_read(body, text, model=model, tool=tool, tools=tools),
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


def message_read(
    body: Any, text: str, *, model: str, tool: str | None = None, tools: bool = False
) -> ProviderReply:
    """A 200's text blocks joined (with ``tool``: that tool's input, ``tool_input_read``), or
    ``malformed_response`` naming what is missing (no text says the ``stop_reason``); with
    ``tools``, ``tool_use`` blocks and no text are an empty output."""
    if not isinstance(body, dict):
        raw = {"status": 200, "body": error_body_excerpt(None, text)}
        return errored("malformed_response", "the 200 body is not a JSON object", raw, model)
    content = body.get("content")
    if not isinstance(content, list):
        raw = malformed_raw(body, text)
        return errored("malformed_response", "the reply has no content", raw, model)
    if tool is not None:
        return tool_input_read(body, text, content, model=model, tool=tool)
    output = "".join(
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )
    calls = tools and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
    if not output and not calls:
        stop = body.get("stop_reason")
        why = f"no text (stop_reason {stop!r:.60})" if isinstance(stop, str) else "no text"
        raw = malformed_raw(body, text)
        return errored("malformed_response", f"the reply has {why}", raw, model)
    return answered(body, output, model=model, usage_read=anthropic_usage)


def tool_input_read(
    body: dict[str, Any], text: str, content: list[Any], *, model: str, tool: str
) -> ProviderReply:
    """The first ``tool_use`` block named ``tool``: its ``input`` object as JSON text (UTF-8 kept,
    NaN written as ``NaN`` for a strict reader to refuse), else ``malformed_response``. The
    body is read again refusing a repeated key, which the first reading kept the last of."""
    block = next(
        (
            b
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == tool
        ),
        None,
    )
    if block is None:
        stop = body.get("stop_reason")
        why = f" (stop_reason {stop!r:.60})" if isinstance(stop, str) else ""
        raw = malformed_raw(body, text)
        message = f"the reply has no tool_use block for the forced tool {tool!r}{why}"
        return errored("malformed_response", message, raw, model)
    tool_input = block.get("input")
    if not isinstance(tool_input, dict):
        raw = malformed_raw(body, text)
        message = f"the {tool!r} tool_use input is not an object ({type(tool_input).__name__})"
        return errored("malformed_response", message, raw, model)
    try:
        json.loads(text, object_pairs_hook=no_duplicate_keys)
    except ValueError as exc:
        raw = malformed_raw(body, text)
        return errored("malformed_response", f"the reply repeats a key: {exc}", raw, model)
    output = json.dumps(tool_input, ensure_ascii=False)
    return answered(body, output, model=model, usage_read=anthropic_usage)
