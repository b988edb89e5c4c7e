"""The judge client: the request a judge version sends and a typed outcome per call.

HTTP (retries, ``Retry-After``, error kinds) is ``providers.openai.client.ChatClient``'s.
Here: system + user messages, the version's request settings and, with
``structured_output`` (default on), a strict ``json_schema`` ``response_format``; the
outcome is the reply text or a reason from ``judges.parsing.ERROR_REASONS``, raw body kept.

Error mapping (``ChatClient`` kind -> reason): ``rate_limited`` (429 after the last
attempt), ``timeout``, ``server_error`` keep their names; ``connection_error`` and any other
4xx -> ``http_error``; a 400/422 naming a parameter -> ``rejected_parameter`` (the rest of
the batch is not sent); a 200 with ``message.refusal`` or ``finish_reason =
content_filter`` -> ``refusal``; no choices or empty content -> ``empty``; a non-JSON 200
body -> ``http_error``.

Client settings (``params``, all optional): ``max_attempts`` (4), ``timeout_s`` (60),
``backoff_base_s`` (1), ``backoff_max_s`` (60), ``concurrency`` (8), ``structured_output``,
``reply_format`` ("json" | "line"), ``verdict_slots`` (pairwise), ``rpm``, ``tpm`` and
``limit_key`` (the endpoint's limits shared with targets calling the same model and URL:
``providers.limiter``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from providers.endpoint import EndpointConfig
from providers.openai.client import ChatClient

Sleep = Callable[[float], Awaitable[None]]


def client_config_parse(*, base_url: str, model: str, params: dict) -> EndpointConfig:
    """The endpoint config of a judge version's ``params``, with a target's bounds
    (``providers.endpoint.EndpointConfig.parse``). Raises ``DomainError`` naming the
    field ``params.<name>`` (``base_url`` and ``model`` bare)."""
    try:
        return EndpointConfig.parse(
            {
                "base_url": base_url,
                "model": model,
                "api_key_env": params.get("api_key_env", "OPENAI_API_KEY"),
                "timeout_s": params.get("timeout_s", 60.0),
                "max_attempts": params.get("max_attempts", DEFAULT_MAX_ATTEMPTS),
                "backoff_base_s": params.get("backoff_base_s", 1.0),
                "backoff_max_s": params.get("backoff_max_s", 60.0),
                "retry_after_max_s": params.get("retry_after_max_s", 300.0),
                "rpm": params.get("rpm"),
                "tpm": params.get("tpm"),
                "limit_key": params.get("limit_key"),
                **({"concurrency": params["concurrency"]} if "concurrency" in params else {}),
            },
            prefix="params",
            concurrency_default=DEFAULT_CONCURRENCY,
        )
    except DomainError as exc:
        name = (exc.field or "").removeprefix("params.")
        if name not in ("base_url", "model"):
            raise
        raise DomainError(exc.message, field=name) from exc


DEFAULT_MAX_ATTEMPTS = 4
# A judge version's calls in flight unless its params say (a target's default is 16:
# evals.runner.targets.base.DEFAULT_CONCURRENCY).
DEFAULT_CONCURRENCY = 8
CLIENT_PARAMS = frozenset(
    {
        "max_attempts",
        "timeout_s",
        "backoff_base_s",
        "backoff_max_s",
        "retry_after_max_s",
        "concurrency",
        "structured_output",
        "reply_format",
        "criteria",
        "api_key_env",
        "verdict_slots",
        "rpm",
        "tpm",
        "limit_key",
    }
)


def default_sleep(seconds: float) -> Awaitable[None]:
    """The real clock; tests replace ``judges.client.default_sleep`` with a fake one."""
    return asyncio.sleep(seconds)


@dataclass(frozen=True)
class JudgeReply:
    """One judge call's outcome: ``content`` (None on error); ``reason`` (None, else one of
    ``ERROR_REASONS``); ``message``, the provider's words; ``raw``, the JSON-safe body; tokens
    (None when unknown); ``latency_ms`` over all ``attempts``; ``model``, for pricing."""

    content: str | None
    reason: str | None = None
    message: str = ""
    raw: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = 0.0
    attempts: int = 1
    model: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def request_settings(params: dict) -> dict[str, Any]:
    """The params sent in the request body (all but the client settings)."""
    return {k: v for k, v in params.items() if k not in CLIENT_PARAMS}


def _classify(kind: str | None, raw: Any, error: str) -> str:
    if kind == "rate_limited":
        return "rate_limited"
    if kind == "timeout":
        return "timeout"
    if kind and kind.startswith("server_error"):
        return "server_error"
    if kind == "rejected_parameter":  # read by providers.answers.rejected_parameter_name
        return "rejected_parameter"
    if kind == "malformed_response" and isinstance(raw, dict):
        choices = raw.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message") or {}
            if isinstance(message, dict) and message.get("refusal"):
                return "refusal"
            return "empty"
        if isinstance(choices, list):
            return "empty"
    return "http_error"


class JudgeClient:
    """Calls one judge version's endpoint; belongs to one event loop. ``sleep`` defaults to the
    module's ``default_sleep``, read at call time."""

    def __init__(
        self, *, base_url: str, model: str, params: dict, sleep: Sleep | None = None
    ) -> None:
        self.model = model
        self.params = params
        self.structured = params.get("structured_output", True) is not False
        config = client_config_parse(base_url=base_url, model=model, params=params)
        self.max_attempts = config.max_attempts
        self._client = ChatClient(config, sleep=sleep or (lambda s: default_sleep(s)))

    def request_body(self, *, messages: list[dict], schema: dict | None) -> dict[str, Any]:
        """The chat-completions body; the schema as ``response_format`` when structured output is
        on."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            **request_settings(self.params),
        }
        if self.structured and schema:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "judge_verdict", "strict": True, "schema": schema},
            }
        return body

    async def complete(self, *, messages: list[dict], schema: dict | None) -> JudgeReply:
        """One judge call; never raises for provider failures."""
        result = await self._client.send(self.request_body(messages=messages, schema=schema))
        if result.ok:
            raw = result.raw_response
            choice = (raw.get("choices") or [{}])[0] if isinstance(raw, dict) else {}
            if isinstance(choice, dict) and choice.get("finish_reason") == "content_filter":
                return JudgeReply(
                    content=None,
                    reason="refusal",
                    message="finish_reason content_filter",
                    raw=raw,
                    input_tokens=result.input_tokens,
                    output_tokens=result.output_tokens,
                    latency_ms=result.latency_ms,
                    attempts=result.attempts,
                    model=result.model,
                )
            return JudgeReply(
                content=result.output,
                raw=raw,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                latency_ms=result.latency_ms,
                attempts=result.attempts,
                model=result.model,
            )
        reason = _classify(result.error_kind, result.raw_response, result.error or "")
        return JudgeReply(
            content=None,
            reason=reason,
            message=result.error or "",
            raw=result.raw_response,
            latency_ms=result.latency_ms,
            attempts=result.attempts,
            model=result.model,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
