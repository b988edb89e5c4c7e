"""A target that calls a model endpoint (kind ``openai``): OpenAI-compatible chat completions,
Anthropic's Messages API with ``"provider": "anthropic"`` (docs/providers/anthropic.md), or an
Azure OpenAI deployment with ``"provider": "azure"`` (docs/providers/azure.md).

The target owns what is sent (prompt template, system prompt, settings, ``request_body``,
the tool loop); the call itself is the provider's client (``providers.protocols.Provider.client``:
``ChatClient``, ``MessagesClient``, ``AzureChatClient``), endpoint settings are parsed by
``providers.endpoint``. Failures never raise: every call ends as a
``TargetResult``, errored with a kind first (``rate_limited``, ``timeout``, ...).

With ``tools`` a trial is a tool loop (``evals.runner.targets.tool_loop``) on either protocol
(``evals.runner.targets.tool_protocols``); only then is a reply with no text carrying tool
calls (``tool_calls``, ``tool_use`` blocks) an answer rather than ``malformed_response``.

A target instance belongs to one event loop: build, use and ``aclose()`` it inside the same
``asyncio.run``.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from core.bounds import seed_problem, text_problem
from core.errors import DomainError
from core.placeholders import placeholder_list, placeholders_check
from evals.runner.targets.base import CaseInput, TargetResult, concurrency_default, result_storable
from evals.runner.targets.tool_loop import TOOL_LOOP_FIELDS, Pricer, ToolLoop, ToolLoopConfig
from providers import protocols
from providers.anthropic import endpoint as anthropic_endpoint
from providers.anthropic.client import messages_body
from providers.client import EndpointClient, Sleep
from providers.endpoint import (
    ENDPOINT_FIELDS,
    EndpointConfig,
    base_url_parse,
    endpoint_settings_parse,
    limit_settings_parse,
    required_str,
)
from providers.limiter import Limiter
from providers.protocols import PROVIDER_FIELDS, Provider
from providers.reply import ProviderReply
from providers.transport import JsonPoster

# The placeholders of a target's prompt template (``$name``, see ``core.placeholders``).
TEMPLATE_FIELDS = ("input", "expected", "key", "context", "tags", "attempt")
# The ones that differ from case to case: a template needs one of them, or every case is
# sent the same prompt. $tags (shared by many cases) and $attempt (the same for every case
# of an attempt) do not count.
CASE_FIELDS = ("input", "expected", "context", "key")
# Set by Assay (tools: declared as ``target.tools``, see ``tool_loop``), never a setting.
RESERVED_SETTINGS = frozenset({"model", "messages", "stream", "n", "tools", "functions"})
# The fields of a target config beside its endpoint's (``ENDPOINT_FIELDS``) and its tool
# loop's (``TOOL_LOOP_FIELDS``).
TARGET_FIELDS = frozenset(
    {
        "kind",
        "provider",
        *(name for fields in PROVIDER_FIELDS.values() for name in fields),
        "prompt_revision",
        "prompt_template",
        "system_prompt",
        "settings",
        "seed_per_trial",
    }
)
# The protocols a model target may speak (``provider``), the first the default.
PREFIX = "target"  # a target config's fields are named target.<name> in errors


@dataclass(frozen=True)
class OpenAIConfig:
    """Parsed target config: the endpoint's part (``providers.endpoint``) and the
    target's own. ``settings`` is passed through to the request body by the provider's own
    names (temperature, max_tokens, seed, ...). ``protocol``: the ``provider`` and its own
    settings (``providers.protocols.Provider``)."""

    endpoint: EndpointConfig
    prompt_template: str
    system_prompt: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    tool_loop: ToolLoopConfig | None = None
    protocol: Provider = field(default_factory=Provider)
    seed_per_trial: int | None = None

    @property
    def provider(self) -> str:
        """One of ``providers.protocols.PROVIDERS``."""
        return self.protocol.name

    @property
    def anthropic_version(self) -> str | None:
        """The ``anthropic-version`` header's value, None unless ``anthropic``."""
        return self.protocol.anthropic_version

    @property
    def base_url(self) -> str:
        return self.endpoint.base_url

    @property
    def model(self) -> str:
        return self.endpoint.model

    @property
    def api_key_env(self) -> str | None:
        """The key's variable, None for a keyless endpoint."""
        return self.endpoint.api_key_env

    @property
    def concurrency(self) -> int:
        return self.endpoint.concurrency

    @classmethod
    def parse(cls, config: dict) -> OpenAIConfig:
        """Validate a target config dict; raises ``DomainError`` naming the field, checked in order:
        unknown fields, ``provider``, ``base_url``, ``prompt_template``, ``system_prompt``,
        ``settings``, the endpoint, the tool loop, the limits."""
        known = ENDPOINT_FIELDS | TARGET_FIELDS | TOOL_LOOP_FIELDS
        unknown = sorted(set(config) - known)
        if unknown:
            raise DomainError("unknown field", field=f"target.{unknown[0]}")
        protocol = protocols.provider_parse(config, prefix=PREFIX)
        base_url = base_url_parse(config, prefix=PREFIX)
        template = required_str(config, "prompt_template", prefix=PREFIX)
        prompt_template_check(template)
        system_prompt = config.get("system_prompt")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise DomainError("expected a string", field="target.system_prompt")
        settings = config.get("settings")
        settings = {} if settings is None else settings
        if not isinstance(settings, dict):
            raise DomainError("expected an object", field="target.settings")
        reserved = sorted(RESERVED_SETTINGS & set(settings))
        if reserved:
            raise DomainError("set by Assay, not a setting", field=f"target.settings.{reserved[0]}")
        if "seed" in settings and (problem := seed_problem(settings["seed"])):
            raise DomainError(problem, field="target.settings.seed")
        if protocol.name == "anthropic":
            anthropic_endpoint.settings_check(settings, prefix=PREFIX)
        seed_per_trial = _seed_per_trial_parse(config, settings, protocol)
        endpoint = endpoint_settings_parse(
            config,
            prefix=PREFIX,
            concurrency_default=concurrency_default(config),
            api_key_env_default=protocol.api_key_env_default,
        )
        tool_loop = ToolLoopConfig.parse(config)
        limits = limit_settings_parse(config, prefix=PREFIX)
        return cls(
            endpoint=EndpointConfig(base_url=base_url, **endpoint, **limits),
            prompt_template=template,
            system_prompt=system_prompt,
            settings=dict(settings),
            tool_loop=tool_loop,
            protocol=protocol,
            seed_per_trial=seed_per_trial,
        )


def _seed_per_trial_parse(config: dict, settings: dict, protocol: Provider) -> int | None:
    """``seed_per_trial``: an integer from which each trial's ``seed`` setting is drawn
    (``trial_seed``), so variants of an experiment send the same seed for a case and attempt.
    Refused beside ``settings.seed`` (one or the other) and on Anthropic (no seed parameter)."""
    value = config.get("seed_per_trial")
    if value is None:
        return None
    if problem := seed_problem(value):
        raise DomainError(problem, field="target.seed_per_trial")
    if "seed" in settings:
        raise DomainError(
            "give settings.seed (one seed for every trial) or seed_per_trial, not both",
            field="target.seed_per_trial",
        )
    if protocol.name == "anthropic":
        raise DomainError("Anthropic's Messages API takes no seed", field="target.seed_per_trial")
    return int(value)


def trial_seed(seed: int, key: str, attempt: int) -> int:
    """The ``seed`` sent for a trial of a target with ``seed_per_trial``: blake2b-64 of
    ``seed|key|attempt`` reduced to [0, 2**31 − 1] (the range every OpenAI-compatible server
    accepts); the same case and attempt get the same seed in every run naming ``seed``."""
    digest = hashlib.blake2b(f"{seed}|{key}|{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (2**31 - 1)


def prompt_template_check(template: str) -> list[str]:
    """The placeholders a target's prompt template uses; raises ``DomainError`` with
    field ``target.prompt_template`` for the brace syntax (``{input}``), a malformed ``$``,
    an unknown ``$name``, or a template with no case placeholder (``CASE_FIELDS``)."""
    field = "target.prompt_template"
    if problem := text_problem(template, "prompt_template"):
        raise DomainError(problem, field=field, code="too_large")
    names = placeholders_check(template, field=field, offered=TEMPLATE_FIELDS, error=DomainError)
    if not set(names) & set(CASE_FIELDS):
        raise DomainError(
            "uses no case placeholder, so every case would be sent the same prompt: use "
            f"$input (case placeholders: {placeholder_list(CASE_FIELDS)})",
            field=field,
        )
    return names


def prompt_render(template: str, case: CaseInput) -> str:
    """The user message for ``case``: ``string.Template`` substitution of ``$input``,
    ``$expected``, ``$key``, ``$context``, ``$tags``, ``$attempt`` (``$$`` is ``$``). Case text is
    inserted in one pass, never re-read as a template; JSON values as compact JSON;
    ``$context`` one ``[id] text`` line per document; ``$tags`` comma-separated."""
    values = {
        "input": _as_text(case.input),
        "expected": "" if case.expected is None else _as_text(case.expected),
        "key": case.key,
        "context": "\n".join(
            f"[{doc.get('id', '')}] {doc.get('text', '')}" if isinstance(doc, dict) else str(doc)
            for doc in case.context
        ),
        "tags": ", ".join(case.tags),
        "attempt": str(case.attempt),
    }
    return string.Template(template).substitute(values)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class OpenAITarget:
    """Calls through the provider's client (``providers.protocols.Provider.client``). ``sleep``
    and ``rng`` are injectable for tests on a fake clock; ``pricer``
    (async ``model -> Price | None``) prices a tool loop's calls."""

    kind = "openai"
    # A call waiting for the shared limiter may be withdrawn (``evals.runner.calls``).
    withdrawable = True

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
        pricer: Pricer | None = None,
    ) -> None:
        self.config = config
        self.concurrency = config.concurrency
        self.model: str | None = config.model
        self.client: EndpointClient = config.protocol.client(config.endpoint, sleep=sleep, rng=rng)
        # The endpoint's shared limiter and the HTTP client, the client's own.
        self.limiter: Limiter = self.client.limiter
        self.http: JsonPoster = self.client.http
        self._tool_loop: ToolLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        if config.tool_loop is not None:
            self._executor = ThreadPoolExecutor(
                max_workers=config.concurrency, thread_name_prefix="assay-tools"
            )
            self._tool_loop = ToolLoop(
                config.tool_loop,
                send=self.call_body,
                model=config.model,
                executor=self._executor,
                pricer=pricer,
                protocol=config.provider,
            )

    @classmethod
    def from_config(
        cls,
        config: dict,
        *,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
        pricer: Pricer | None = None,
    ) -> OpenAITarget:
        """Build from a run's target snapshot; raises ``DomainError`` naming the field."""
        return cls(OpenAIConfig.parse(config), sleep=sleep, rng=rng, pricer=pricer)

    def request_body(self, case: CaseInput) -> dict[str, Any]:
        """The JSON body sent for ``case``: model, messages, then the settings as given; for
        ``anthropic`` the Messages API's (``messages_body``: the system prompt in ``system``)."""
        user = prompt_render(self.config.prompt_template, case)
        if self.config.provider == "anthropic":
            return messages_body(
                model=self.config.model,
                system=self.config.system_prompt,
                messages=[{"role": "user", "content": user}],
                settings=self.config.settings,
            )
        messages = []
        if self.config.system_prompt:
            messages.append({"role": "system", "content": self.config.system_prompt})
        messages.append({"role": "user", "content": user})
        body = {"model": self.config.model, "messages": messages, **self.config.settings}
        if self.config.seed_per_trial is not None:
            body["seed"] = trial_seed(self.config.seed_per_trial, case.key, case.attempt)
        return body

    async def call(self, case: CaseInput) -> TargetResult:
        """One trial: up to ``max_attempts`` HTTP attempts; never raises for provider
        failures. ``latency_ms`` is wall-clock over all attempts and waits. With tools, the
        tool loop's trial (``tool_loop``): many calls, a trajectory and a final state."""
        body = self.request_body(case)
        if self._tool_loop is not None:
            return result_storable(await self._tool_loop.run(case, body))
        return replace(await self.call_body(body), request=body)

    async def call_body(self, body: dict[str, Any]) -> TargetResult:
        """Send a prebuilt ``body`` through the provider's client (retries, error kinds); the tool
        loop sends its turns here."""
        return target_result(await self.client.send(body))

    async def aclose(self) -> None:
        """Close the client and the tool threads; a sync tool past its timeout ends on its own."""
        await self.client.aclose()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def target_result(reply: ProviderReply) -> TargetResult:
    """The provider's ``reply`` as a target's result, field for field (no request, no
    trajectory: ``call`` and the tool loop add theirs)."""
    return TargetResult(
        output=reply.output,
        raw_response=reply.raw_response,
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cache_write_tokens=reply.cache_write_tokens,
        cache_read_tokens=reply.cache_read_tokens,
        reasoning_tokens=reply.reasoning_tokens,
        latency_ms=reply.latency_ms,
        error=reply.error,
        model=reply.model,
        attempts=reply.attempts,
        error_kind=reply.error_kind,
    )
