"""How the tool loop speaks each provider protocol (``evals.runner.targets.tool_loop``: one
loop, this module its wire shapes; docs/agents.md, docs/providers/anthropic.md).

An adapter turns the declared tools into the request's ``tools``, a reply into its text and
its tool calls, and builds the two messages a turn adds: the assistant turn sent back and the
tools' results. A call, whatever the protocol, is ``{"id", "name", "arguments", "problem",
"raw_arguments"}`` (``problem``: why it cannot be run, None when it can), so the loop records
the same trajectory steps and the same failed steps on either protocol:

- OpenAI chat completions: ``tools: [{"type": "function", "function": {name, description,
  parameters}}]``; a reply's ``message.tool_calls`` (``arguments`` JSON text); the assistant
  message with its ``tool_calls``; one ``{"role": "tool", "tool_call_id", "content"}`` per call.
- Anthropic Messages: ``tools: [{name, description, input_schema}]``; a reply's ``tool_use``
  blocks (``input`` an object), its ``text`` blocks joined as the turn's text; the assistant
  turn sent back with its content blocks (``thinking`` included, as the API requires); one
  user message of ``tool_result`` blocks (``tool_use_id``, ``content``, ``is_error`` for a
  failed call). An ``input`` that is not an object is bad arguments, in the words OpenAI's
  invalid JSON gets (a string is read as JSON text first); the last ``tool_use`` of a reply
  stopped at ``max_tokens`` is cut off, never run.

Model output is untrusted: names and ids are cut to ``MAX_NAME_CHARS``, arguments only ever
reach the declared functions as keyword arguments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evals.runner.targets.base import TargetResult
from evals.runner.targets.tools import Tool

MAX_NAME_CHARS = 200  # a model's tool name longer than this is cut in the trajectory


@dataclass(frozen=True)
class ToolResult:
    """One run call's result as sent back: the ``call``, ``ok``, and ``text`` (the content as
    message text, ``tools.tool_content_text``)."""

    call: dict[str, Any]
    ok: bool
    text: str


class OpenAITools:
    """The tool loop on OpenAI's chat completions (module docstring)."""

    def declarations(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The request's ``tools``: each tool's function-calling entry as declared."""
        return [tool.schema for tool in tools]

    def reply(self, result: TargetResult) -> tuple[str | None, list[dict[str, Any]]]:
        """The reply's text (None when it has none) and its tool calls."""
        raw = result.raw_response if isinstance(result.raw_response, dict) else {}
        choices = raw.get("choices") if isinstance(raw.get("choices"), list) else []
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        message = message if isinstance(message, dict) else {}
        content = message.get("content") if isinstance(message.get("content"), str) else None
        tool_calls = message.get("tool_calls")
        tool_calls = tool_calls if isinstance(tool_calls, list) else []
        return content, [_openai_call(i, item) for i, item in enumerate(tool_calls)]

    def assistant_message(
        self, result: TargetResult, content: str | None, calls: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The assistant turn sent back: its text and its tool calls in the request format."""
        return {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["raw_arguments"]},
                }
                for call in calls
            ],
        }

    def results_messages(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """One ``role: tool`` message per call, in the calls' order."""
        return [{"role": "tool", "tool_call_id": r.call["id"], "content": r.text} for r in results]


class AnthropicTools:
    """The tool loop on Anthropic's Messages API (module docstring)."""

    def declarations(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        """The request's ``tools``: ``{name, description, input_schema}`` from each tool's entry."""
        out = []
        for tool in tools:
            function = tool.schema["function"]
            out.append(
                {
                    "name": function["name"],
                    "description": function["description"],
                    "input_schema": function["parameters"],
                }
            )
        return out

    def reply(self, result: TargetResult) -> tuple[str | None, list[dict[str, Any]]]:
        """The reply's ``text`` blocks joined (None when there are none) and its ``tool_use``
        blocks as calls; under ``stop_reason`` ``max_tokens`` the last call is cut off."""
        blocks = _blocks(result)
        texts = [
            b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        calls = [_anthropic_call(i, block) for i, block in enumerate(uses)]
        raw = result.raw_response if isinstance(result.raw_response, dict) else {}
        if calls and raw.get("stop_reason") == "max_tokens":
            calls[-1]["problem"] = (
                "arguments cut off: the reply stopped at max_tokens inside this call"
            )
        return ("".join(texts) if texts else None), calls

    def assistant_message(
        self, result: TargetResult, content: str | None, calls: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The assistant turn sent back: the reply's content blocks as received, each
        ``tool_use`` with the id and name its call carries (cut as in the trajectory)."""
        calls_left = iter(calls)
        sent = []
        for block in _blocks(result):
            if block.get("type") == "tool_use":
                call = next(calls_left)
                block = {**block, "id": call["id"], "name": call["name"]}
                block.setdefault("input", {})
            sent.append(block)
        return {"role": "assistant", "content": sent}

    def results_messages(self, results: list[ToolResult]) -> list[dict[str, Any]]:
        """One user message of ``tool_result`` blocks, in the calls' order."""
        blocks: list[dict[str, Any]] = []
        for r in results:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": r.call["id"],
                "content": r.text,
            }
            if not r.ok:
                block["is_error"] = True
            blocks.append(block)
        return [{"role": "user", "content": blocks}]


ToolProtocol = OpenAITools | AnthropicTools
# The adapter of each provider protocol a model target may name (``providers.protocols``).
# Azure OpenAI speaks OpenAI's protocol at another URL.
TOOL_PROTOCOLS: dict[str, ToolProtocol] = {
    "openai": OpenAITools(),
    "azure": OpenAITools(),
    "anthropic": AnthropicTools(),
}


def _blocks(result: TargetResult) -> list[dict[str, Any]]:
    raw = result.raw_response if isinstance(result.raw_response, dict) else {}
    content = raw.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _name_and_id(index: int, name: Any, call_id: Any) -> tuple[str, str]:
    name = name[:MAX_NAME_CHARS] if isinstance(name, str) and name else "(no name)"
    call_id = call_id[:MAX_NAME_CHARS] if isinstance(call_id, str) and call_id else f"call_{index}"
    return name, call_id


def _openai_call(index: int, item: Any) -> dict[str, Any]:
    item = item if isinstance(item, dict) else {}
    function = item.get("function") if isinstance(item.get("function"), dict) else {}
    name, call_id = _name_and_id(index, function.get("name"), item.get("id"))
    text = function.get("arguments")
    if isinstance(text, dict):  # some servers send the object itself
        return _call(call_id, name, text, None, json.dumps(text, ensure_ascii=False))
    if not isinstance(text, str) or not text.strip():
        return _call(call_id, name, {}, None, "{}")
    arguments, problem = _arguments_parse(text)
    return _call(call_id, name, arguments, problem, text)


def _anthropic_call(index: int, block: dict[str, Any]) -> dict[str, Any]:
    name, call_id = _name_and_id(index, block.get("name"), block.get("id"))
    value = block.get("input", {})
    if isinstance(value, dict):
        return _call(call_id, name, value, None, json.dumps(value, ensure_ascii=False))
    if isinstance(value, str):
        # JSON text where the object belongs: invalid JSON in OpenAI's words, else not an object
        problem = _arguments_parse(value)[1] or "arguments are not a JSON object"
        return _call(call_id, name, None, problem, value)
    text = json.dumps(value, ensure_ascii=False)
    return _call(call_id, name, None, "arguments are not a JSON object", text)


def _arguments_parse(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(arguments, problem)`` of arguments given as JSON text."""
    try:
        arguments = json.loads(text, parse_constant=_not_json)
    except ValueError as exc:
        return None, f"arguments are not JSON: {exc}"
    if not isinstance(arguments, dict):  # ``null`` too: never a call with ``$unparsed``
        return None, "arguments are not a JSON object"
    return arguments, None


def _call(
    call_id: str, name: str, arguments: dict[str, Any] | None, problem: str | None, text: str
) -> dict[str, Any]:
    return {
        "id": call_id,
        "name": name,
        "arguments": {"$unparsed": text} if arguments is None else arguments,
        "problem": problem,
        "raw_arguments": text,
    }


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
