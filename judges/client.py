"""The judge client: the request a judge version sends and a typed outcome per call.

HTTP (retries, ``Retry-After``, error kinds) is the provider's client's: ``params["provider"]``
``"openai"`` (the default: ``providers.openai.client.ChatClient``), ``"anthropic"``
(``providers.anthropic.client.MessagesClient``; docs/providers/anthropic.md) or ``"azure"``
(``providers.azure.client.AzureChatClient``, OpenAI's protocol at a deployment's URL;
docs/providers/azure.md). Here: system + user messages, the version's request settings and, with
``structured_output`` (default on), the schema: on OpenAI and Azure a strict ``json_schema``
``response_format``; on Anthropic, for a schema
constraining ids by an ``enum`` (``schema_cites_ids``), a forced tool (``ANSWER_TOOL``) whose
``input_schema`` is the schema, its ``tool_use`` input read as the reply (none is an error:
``unparseable``). The outcome is the reply text or a reason from
``judges.parsing.ERROR_REASONS``, raw body kept.

Error mapping (``ChatClient`` kind -> reason): ``rate_limited`` (429 after the last
attempt), ``timeout``, ``server_error`` keep their names; ``connection_error`` and any other
4xx -> ``http_error``; a 400/422 naming a parameter -> ``rejected_parameter`` (the rest of
the batch is not sent); a 200 with ``message.refusal`` or ``finish_reason =
content_filter`` (Anthropic: ``stop_reason = refusal``) -> ``refusal``; no choices or empty
content (Anthropic: no text) -> ``empty``; Anthropic, a forced tool not used (or its input
not an object, or a key twice) -> ``unparseable``; a non-JSON 200 body -> ``http_error``.

Client settings (``params``, all optional): ``max_attempts`` (4), ``timeout_s`` (60),
``backoff_base_s`` (1), ``backoff_max_s`` (60), ``concurrency`` (8), ``structured_output``,
``reply_format`` ("json" | "line"), ``verdict_slots`` (pairwise), ``rpm``, ``tpm`` and
``limit_key`` (the endpoint's limits shared with targets calling the same model and URL:
``providers.limiter``), ``provider`` and, on Anthropic, ``anthropic_version``, on Azure
``deployment`` and ``api_version`` (both required). On Anthropic
``max_tokens`` is required and ``system``, ``messages``, ``tools``, ``tool_choice`` and
``stream`` are Assay's (``judge_endpoint_parse``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from providers.anthropic import endpoint as anthropic_endpoint
from providers.anthropic.client import messages_body
from providers.client import EndpointClient
from providers.endpoint import EndpointConfig
from providers.protocols import PROVIDER_FIELDS, Provider, provider_parse
from providers.usage import usage_of, usage_tokens

Sleep = Callable[[float], Awaitable[None]]

# The protocols a judge version may speak (``params["provider"]``), the first the default.
# The tool an Anthropic judge call is forced to answer with when its schema constrains ids.
ANSWER_TOOL = "judge_verdict"
# Body fields an Anthropic judge call sets itself: never a version's setting.
ANTHROPIC_RESERVED = ("system", "messages", "tools", "tool_choice", "stream")


@dataclass(frozen=True)
class JudgeEndpoint:
    """A judge version's endpoint: its ``config`` and ``protocol`` (the ``provider`` and its own
    settings, ``providers.protocols.Provider``)."""

    config: EndpointConfig
    protocol: Provider = Provider()

    @property
    def provider(self) -> str:
        """One of ``providers.protocols.PROVIDERS``."""
        return self.protocol.name

    @property
    def anthropic_version(self) -> str | None:
        """The ``anthropic-version`` header's value on Anthropic, else None."""
        return self.protocol.anthropic_version


def client_config_parse(*, base_url: str, model: str, params: dict) -> EndpointConfig:
    """The endpoint config of a judge version's ``params`` (``judge_endpoint_parse``)."""
    return judge_endpoint_parse(base_url=base_url, model=model, params=params).config


def judge_endpoint_parse(*, base_url: str, model: str, params: dict) -> JudgeEndpoint:
    """The endpoint of a judge version's ``params``, with a target's bounds
    (``providers.endpoint.EndpointConfig.parse``); the key's variable defaults to the
    provider's (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``AZURE_OPENAI_API_KEY``). Raises
    ``DomainError`` naming the field ``params.<name>`` (``base_url`` and ``model`` bare): an
    unknown ``provider``, a provider's field (``anthropic_version``, ``deployment``,
    ``api_version``) off its provider or malformed, on Azure a missing ``deployment`` or
    ``api_version``, and on Anthropic a missing ``max_tokens`` or a field Assay sets
    (``ANTHROPIC_RESERVED``)."""
    protocol = _provider_parse(params)
    key_default = protocol.api_key_env_default
    try:
        config = EndpointConfig.parse(
            {
                "base_url": base_url,
                "model": model,
                "api_key_env": params.get("api_key_env", key_default),
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
    return JudgeEndpoint(config=config, protocol=protocol)


def _provider_parse(params: dict) -> Provider:
    """The ``Provider`` of ``params``, the Anthropic settings checked."""
    protocol = provider_parse(params, prefix="params")
    if protocol.name != "anthropic":
        return protocol
    settings = request_settings(params)
    reserved = [name for name in ANTHROPIC_RESERVED if name in settings]
    if reserved:
        raise DomainError(
            "set by Assay (the judge's system message, prompt and answer tool), not a setting",
            field=f"params.{reserved[0]}",
        )
    try:
        anthropic_endpoint.settings_check(settings, prefix="params")
    except DomainError as exc:  # its field is <prefix>.settings.<name>: a judge's is params.<name>
        field = (exc.field or "").replace("params.settings.", "params.", 1)
        raise DomainError(exc.message, field=field) from exc
    return protocol


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
        "provider",
        *(name for fields in PROVIDER_FIELDS.values() for name in fields),
    }
)


def default_sleep(seconds: float) -> Awaitable[None]:
    """The real clock; tests replace ``judges.client.default_sleep`` with a fake one."""
    return asyncio.sleep(seconds)


@dataclass(frozen=True)
class JudgeReply:
    """One judge call's outcome: ``content`` (None on error); ``reason`` (None, else one of
    ``ERROR_REASONS``); ``message``, the provider's words; ``raw``, the JSON-safe body; tokens
    by class (``providers.usage``, None when unknown); ``latency_ms`` over all ``attempts``;
    ``model``, for pricing."""

    content: str | None
    reason: str | None = None
    message: str = ""
    raw: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = 0.0
    attempts: int = 1
    model: str | None = None
    cache_write_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None

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


def _classify_message(kind: str | None, raw: Any, *, tool: bool) -> str:
    """``_classify`` for an Anthropic answer: a malformed 200 with ``stop_reason`` ``refusal`` is
    ``refusal``; with content blocks but not the forced tool's use (``tool``), ``unparseable``;
    with no text, ``empty``."""
    if kind != "malformed_response" or not isinstance(raw, dict):
        return _classify(kind, raw, "")
    content = raw.get("content")
    if raw.get("stop_reason") == "refusal":
        return "refusal"
    if not isinstance(content, list):
        return "http_error"
    return "unparseable" if tool and content else "empty"


def schema_cites_ids(schema: Any) -> bool:
    """Whether ``schema`` holds a property named ``*id``/``*ids`` constrained by an ``enum`` (a
    document id: ``judges.kinds``), following ``properties`` and ``items``."""
    if not isinstance(schema, dict):
        return False
    properties = schema.get("properties")
    for name, sub in properties.items() if isinstance(properties, dict) else ():
        if isinstance(sub, dict) and "enum" in sub and str(name).endswith(("id", "ids")):
            return True
        if schema_cites_ids(sub):
            return True
    return schema_cites_ids(schema.get("items"))


class JudgeClient:
    """Calls one judge version's endpoint; belongs to one event loop. ``sleep`` defaults to the
    module's ``default_sleep``, read at call time."""

    def __init__(
        self, *, base_url: str, model: str, params: dict, sleep: Sleep | None = None
    ) -> None:
        self.model = model
        self.params = params
        self.structured = params.get("structured_output", True) is not False
        endpoint = judge_endpoint_parse(base_url=base_url, model=model, params=params)
        self.provider = endpoint.provider
        self.max_attempts = endpoint.config.max_attempts
        clock = sleep or (lambda s: default_sleep(s))
        self._client: EndpointClient = endpoint.protocol.client(endpoint.config, sleep=clock)

    def request_body(self, *, messages: list[dict], schema: dict | None) -> dict[str, Any]:
        """The chat-completions body (OpenAI and Azure); the schema as ``response_format`` when
        structured output is on. On Anthropic the Messages body (``anthropic_body``)."""
        if self.provider == "anthropic":
            return self.anthropic_body(messages=messages, schema=schema)
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

    def anthropic_body(self, *, messages: list[dict], schema: dict | None) -> dict[str, Any]:
        """The Messages body: the system message in ``system``, the others as ``messages``, the
        version's settings; with structured output on and ``schema_cites_ids(schema)``, the
        tool ``ANSWER_TOOL`` (``input_schema`` the schema) forced by ``tool_choice``."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        body = messages_body(
            model=self.model,
            system=system or None,
            messages=[m for m in messages if m["role"] != "system"],
            settings=request_settings(self.params),
        )
        if self.structured and schema and schema_cites_ids(schema):
            body["tools"] = [
                {
                    "name": ANSWER_TOOL,
                    "description": "Record the judgement: the answer in the required format.",
                    "input_schema": schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
        return body

    async def complete(self, *, messages: list[dict], schema: dict | None) -> JudgeReply:
        """One judge call; never raises for provider failures."""
        body = self.request_body(messages=messages, schema=schema)
        result = await self._client.send(body)
        anthropic = self.provider == "anthropic"
        if result.ok:
            raw = result.raw_response
            if anthropic:
                refused = isinstance(raw, dict) and raw.get("stop_reason") == "refusal"
                why = "stop_reason refusal"
            else:
                choice = (raw.get("choices") or [{}])[0] if isinstance(raw, dict) else {}
                refused = (
                    isinstance(choice, dict) and choice.get("finish_reason") == "content_filter"
                )
                why = "finish_reason content_filter"
            if refused:
                return JudgeReply(
                    content=None,
                    reason="refusal",
                    message=why,
                    raw=raw,
                    latency_ms=result.latency_ms,
                    attempts=result.attempts,
                    model=result.model,
                    **usage_tokens(usage_of(result)),
                )
            return JudgeReply(
                content=result.output,
                raw=raw,
                latency_ms=result.latency_ms,
                attempts=result.attempts,
                model=result.model,
                **usage_tokens(usage_of(result)),
            )
        if anthropic:
            reason = _classify_message(
                result.error_kind, result.raw_response, tool="tool_choice" in body
            )
        else:
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
