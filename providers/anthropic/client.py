"""The Messages API client: POSTs to ``<base_url>/messages`` with ``x-api-key`` (none when
keyless) and ``anthropic-version``; the attempt loop (retries, limiter, refusal memory,
cancellation) is ``providers.client.EndpointClient``'s, answers are read by
``providers.anthropic.answers`` (a call forcing a tool: that tool's input)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from providers.answers import Attempt
from providers.anthropic.answers import answer_read
from providers.anthropic.endpoint import DEFAULT_VERSION
from providers.client import EndpointClient, Sleep, tokens_estimate
from providers.endpoint import EndpointConfig
from providers.transport import HttpAnswer


def messages_body(
    *, model: str, system: str | None, messages: list[dict[str, Any]], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """``{"model", "max_tokens", "system"?, "messages", ...settings}``: ``settings`` by the API's
    own names (``max_tokens`` among them, ``providers.anthropic.endpoint.settings_check``);
    no ``system`` when ``system`` is None or empty."""
    body: dict[str, Any] = {"model": model, "max_tokens": settings.get("max_tokens")}
    if system:
        body["system"] = system
    body["messages"] = messages
    body.update((name, value) for name, value in settings.items() if name != "max_tokens")
    return body


def forced_tool(body: Mapping[str, Any]) -> str | None:
    """The tool ``body`` forces (``tool_choice`` ``{"type": "tool", "name"}``), else None."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        name = choice.get("name")
        return name if isinstance(name, str) else None
    return None


class MessagesClient(EndpointClient):
    """Messages to ``config``'s endpoint (``EndpointClient``); ``version``: the
    ``anthropic-version`` header."""

    path = "/messages"
    provider = "anthropic"

    def __init__(
        self,
        config: EndpointConfig,
        *,
        version: str = DEFAULT_VERSION,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.version = version
        super().__init__(config, sleep=sleep, rng=rng)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self.version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def answer_read(self, response: HttpAnswer, body: dict[str, Any]) -> Attempt:
        """A ``body`` forcing a tool (``forced_tool``) is answered by that tool's input; one
        declaring tools may be answered by ``tool_use`` blocks alone."""
        return answer_read(
            response, model=self.config.model, tool=forced_tool(body), tools="tools" in body
        )

    def tokens_estimate(self, body: dict[str, Any]) -> float:
        """``providers.client.tokens_estimate`` plus the characters / 4 of the ``system`` text and
        of the content blocks a tool loop's turns carry (``blocks_chars``)."""
        system = body.get("system")
        chars = len(system) if isinstance(system, str) else 0
        for message in body.get("messages") or ():
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                chars += blocks_chars(content)
        return tokens_estimate(body) + chars / 4


def blocks_chars(blocks: list[Any]) -> int:
    """Characters of a message's content blocks: ``text`` blocks' text, ``tool_use`` inputs as
    JSON, ``tool_result`` contents (a string, or text blocks)."""
    chars = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            chars += len(block["text"])
        elif kind == "tool_use":
            chars += len(json.dumps(block.get("input"), ensure_ascii=False, default=str))
        elif kind == "tool_result":
            content = block.get("content")
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                chars += blocks_chars(content)
    return chars
