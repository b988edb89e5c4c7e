"""An Inspect AI sample's agent run as a trajectory, a final state and a goal state, read from
one serialised ``EvalSample`` (inspect-ai 0.3.x).

- ``messages`` after the first assistant message (before it: the prompt) become steps: an
  assistant message -> a ``message`` step with its text, then a ``tool_call`` step per
  ``tool_calls[j]`` (``function``, ``arguments``, unparsed ones as ``{"$unparsed": ...}``,
  ``id``); a tool message -> a ``tool_result`` step (``tool_call_id``, ``function``, status
  ``error`` when ``error`` is set, content its text or ``"<error.type>: <error.message>"``);
  a user or system message in the middle -> a ``message`` step with that role. A list of
  parts keeps its text parts joined by newlines, others named (``[image]``);
  ``attachment://<hash>`` text is read back from ``attachments``.
- Figures: the ``model`` event whose ``output.choices[0].message.id`` is an assistant
  message's gives its first step tokens, ``latency_ms`` (``output.time`` s × 1000) and
  ``cost_usd`` (``output.usage.total_cost``, else unknown); a call's ``tool`` event gives its
  result's ``latency_ms`` (``working_time`` s × 1000).
- Final state: the ``store``; an agent sample's empty store is ``{}``, a plain one's none.
  Goal state: ``metadata["goal_state"]`` (Inspect has no field for it).

A one-turn sample without tool calls has no trajectory. A bad value is refused naming the
JSON path (``samples[3].messages[4].content``).
"""

from __future__ import annotations

import math
from typing import Any

from core.errors import DomainError
from evals.trajectory.steps import trajectory_parse
from interop.importers.agent_fields import agent_fields_parse
from interop.importers.harness import as_dict, as_list, fail, show

ATTACHMENT = "attachment://"


def _text(content: Any, path: str, attachments: dict) -> str:
    """A message's content as text (module docstring), attachments resolved."""
    if content is None:
        return ""
    if isinstance(content, str):
        return _resolve(content, attachments)
    parts = []
    for i, part in enumerate(as_list(content, path)):
        part = as_dict(part, f"{path}[{i}]")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise fail(f"{path}[{i}].text", f"expected a string, got {show(text)}")
            parts.append(_resolve(text, attachments))
        else:
            parts.append(f"[{kind if isinstance(kind, str) else 'content'}]")
    return "\n".join(parts)


def _resolve(text: str, attachments: dict) -> str:
    if text.startswith(ATTACHMENT):
        found = attachments.get(text[len(ATTACHMENT) :])
        if isinstance(found, str):
            return found
    return text


def _seconds_ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value) * 1000 if value >= 0 else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _figures(sample: dict) -> tuple[dict[str, dict], dict[str, float]]:
    """(assistant message id -> step figures, tool call id -> latency ms) from ``events``;
    unreadable events leave figures unknown."""
    by_message: dict[str, dict] = {}
    by_call: dict[str, float] = {}
    events = sample.get("events")
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict):
            continue
        if event.get("event") == "model" and isinstance(event.get("output"), dict):
            output = event["output"]
            choices = output.get("choices")
            message = (
                choices[0].get("message")
                if isinstance(choices, list) and choices and isinstance(choices[0], dict)
                else None
            )
            if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                continue
            usage = output.get("usage") if isinstance(output.get("usage"), dict) else {}
            cost: Any = usage.get("total_cost")  # float() only once _seconds_ms reads a number
            by_message[message["id"]] = {
                "input_tokens": _count(usage.get("input_tokens")),
                "output_tokens": _count(usage.get("output_tokens")),
                "latency_ms": _seconds_ms(output.get("time")),
                "cost_usd": None if _seconds_ms(cost) is None else float(cost),
            }
        elif event.get("event") == "tool" and isinstance(event.get("id"), str):
            latency = _seconds_ms(event.get("working_time"))
            if latency is not None:
                by_call[event["id"]] = latency
    return by_message, by_call


def _tool_call(call: Any, path: str) -> dict:
    call = as_dict(call, path)
    name = call.get("function")
    if not isinstance(name, str) or not name:
        raise fail(f"{path}.function", f"expected the tool's name, got {show(name)}")
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        arguments = {"$unparsed": arguments}
    step = {"kind": "tool_call", "name": name, "arguments": arguments}
    if isinstance(call.get("id"), str):
        step["id"] = call["id"]
    return step


def _message_steps(
    message: dict, path: str, attachments: dict, figures: tuple[dict, dict]
) -> list[dict]:
    role = message.get("role")
    text = _text(message.get("content"), f"{path}.content", attachments)
    if role == "assistant":
        steps = [{"kind": "message", "role": "assistant", "content": text}] if text else []
        calls = message.get("tool_calls") or []
        for j, call in enumerate(as_list(calls, f"{path}.tool_calls")):
            steps.append(_tool_call(call, f"{path}.tool_calls[{j}]"))
        if not steps:
            steps = [{"kind": "message", "role": "assistant", "content": ""}]
        known = figures[0].get(message.get("id")) if isinstance(message.get("id"), str) else None
        if known:
            steps[0].update(known)
        return steps
    if role == "tool":
        step: dict[str, Any] = {"kind": "tool_result", "content": text, "status": "ok"}
        if isinstance(message.get("function"), str):
            step["name"] = message["function"]
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str):
            step["id"] = call_id
            if call_id in figures[1]:
                step["latency_ms"] = figures[1][call_id]
        error = message.get("error")
        if error is not None:
            error = as_dict(error, f"{path}.error")
            step["status"] = "error"
            if not text:
                step["content"] = f"{error.get('type', 'error')}: {error.get('message', '')}"
        return [step]
    if role in ("user", "system"):
        return [{"kind": "message", "role": role, "content": text}]
    raise fail(f"{path}.role", f"expected system, user, assistant or tool, got {show(role)}")


def sample_trajectory(sample: dict, path: str) -> list[dict] | None:
    """The sample's steps (module docstring), or None for a one-turn sample without tool calls.
    Raises ``DomainError`` naming the JSON path."""
    messages = sample.get("messages")
    if not messages:
        return None
    messages = as_list(messages, f"{path}.messages")
    attachments = sample.get("attachments")
    attachments = attachments if isinstance(attachments, dict) else {}
    first = next(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
        None,
    )
    if first is None:
        return None
    figures = _figures(sample)
    steps: list[dict] = []
    for i in range(first, len(messages)):
        where = f"{path}.messages[{i}]"
        steps += _message_steps(as_dict(messages[i], where), where, attachments, figures)
    if len(steps) == 1 and steps[0]["kind"] == "message":
        return None
    try:  # unstorable text was refused with its JSON path when the document was read
        return trajectory_parse(steps, field=f"{path}.trajectory")
    except DomainError as exc:
        raise fail(exc.field or f"{path}.trajectory", exc.message) from exc


def sample_final_state(sample: dict, path: str, *, agent: bool) -> Any:
    """The sample's ``store`` (``agent_fields_parse``): None when absent; empty is ``{}`` for an
    ``agent`` sample and None otherwise (Inspect writes ``store: {}`` on every sample)."""
    store = sample.get("store")
    if store is None or (store == {} and not agent):
        return None
    as_dict(store, f"{path}.store")
    values = {"final_state": store}
    where = {"final_state": f"{path}.store"}
    return agent_fields_parse(values, where=path, fields=where).final_state


def sample_goal_state(sample: dict, path: str) -> Any:
    """``metadata["goal_state"]`` (``agent_fields_parse``), or None."""
    metadata = sample.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("goal_state") is None:
        return None
    values = {"goal_state": metadata["goal_state"]}
    where = {"goal_state": f"{path}.metadata.goal_state"}
    return agent_fields_parse(values, where=path, fields=where).goal_state
