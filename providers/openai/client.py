"""The OpenAI-compatible chat client used by evals' target and the judge client: POSTs to
``<base_url>/chat/completions`` with a bearer key; the attempt loop (retries, limiter, refusal
memory, cancellation) is ``providers.client.EndpointClient``'s."""

from __future__ import annotations

from typing import Any

from providers.answers import Attempt
from providers.client import EndpointClient
from providers.openai.answers import answer_read
from providers.transport import HttpAnswer


class ChatClient(EndpointClient):
    """Chat completions to ``config``'s endpoint (``EndpointClient``)."""

    path = "/chat/completions"
    provider = "openai"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def answer_read(self, response: HttpAnswer, body: dict[str, Any]) -> Attempt:
        """A reply with ``tool_calls`` and no text is an answer when ``body`` declares tools."""
        return answer_read(response, model=self.config.model, tools="tools" in body)
