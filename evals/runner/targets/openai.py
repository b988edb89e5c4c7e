"""A target that calls an OpenAI-compatible chat-completions endpoint.

The HTTP/1.1 client is ``evals.runner.targets.transport.JsonPoster`` (aiohttp): one session
per target instance holding at most ``concurrency`` connections, bounded by one
``asyncio.Semaphore`` (why aiohttp, and what it keeps of the httpx client it replaced:
that module's docstring).

Failures never raise (see ``base.py``): every call ends as a ``TargetResult``, errored
with a kind first (``rate_limited``, ``server_error 503``, ``timeout``,
``connection_error``, ``rejected_parameter``, ``client_error 400``, ``malformed_response``)
then the provider's own message. 429, 5xx, timeouts and connection errors are retried with
exponential backoff and jitter, waiting at least ``Retry-After``; other 4xx are not retried.
A call whose run is cancelled (``evals.runner.call_stop``) makes no further attempt: its
back-off and its wait for the limiter wake, and it ends with error kind ``cancelled``.

A rejected parameter (``rejected_parameter``: a 400 or 422 answer naming the parameter in
``error.param``, in a FastAPI/pydantic ``detail[].loc`` of an extra input, or in its message:
``rejected_parameter_name``) reads "model 'm' refuses parameter 'temperature': <the
provider's words>". Once a target instance (one chunk of a run, one batch of judge calls) has
had a call refused that way and no call answered, it stops calling: every later call ends at
once with the same error (``attempts`` 0, ``raw_response["not_sent"]``), so a job whose calls
are all refused pays for one round of calls, not all of them, and says why once.

Stored error bodies are an excerpt: a body over ``MAX_ERROR_BODY_BYTES`` (2 KB) is kept as its
first 2 KB of text with ``truncated`` and its size (``error_body_excerpt``).

A target config with ``tools`` runs a tool loop per trial (OpenAI function calling, caps on
steps, cost and tool time): ``evals.runner.targets.tool_loop``. Only then is a reply whose
content is empty but that carries ``tool_calls`` an answer, not ``malformed_response``.

Every HTTP attempt holds a slot of the endpoint's shared limiter (``evals.runner.limiter``:
calls in flight over every worker, optional ``rpm``/``tpm`` buckets, the pause and slow-down a
429 asks for, the ``x-ratelimit-*`` headers); ``concurrency`` is the endpoint's total across
workers, not this instance's. ``limit_key`` names the endpoint when ``base_url|model`` does not
(two URLs of one account). A 429's wait is ``retry-after-ms`` when sent, else ``Retry-After``.

A target instance belongs to one event loop: build it, use it and ``aclose()`` it inside
the same ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import string
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from django.conf import settings

from core.bounds import seed_problem, text_problem
from core.egress import endpoint_url_problem
from core.errors import DomainError
from core.placeholders import placeholder_list, placeholders_check
from evals.runner.call_stop import CANCELLED_KIND, Stopped, unless_stopped
from evals.runner.limiter import Limiter, Outcome, call_sending, endpoint_key
from evals.runner.limiter.headers import outcome_read, retry_after_ms_seconds
from evals.runner.targets.base import (
    DEFAULT_CONCURRENCY,
    MAX_CONCURRENCY,
    CaseInput,
    TargetResult,
    concurrency_default,
    result_storable,
)
from evals.runner.targets.tool_loop import TOOL_LOOP_FIELDS, Pricer, ToolLoop, ToolLoopConfig
from evals.runner.targets.transport import HttpAnswer, HttpFailure, JsonPoster

# The placeholders of a target's prompt template (``$name``, see ``core.placeholders``).
TEMPLATE_FIELDS = ("input", "expected", "key", "context", "tags", "attempt")
# The ones that differ from case to case: a template needs one of them, or every case is
# sent the same prompt. $tags (shared by many cases) and $attempt (the same for every case
# of an attempt) do not count.
CASE_FIELDS = ("input", "expected", "context", "key")
# Set by Assay (tools: declared as ``target.tools``, see ``tool_loop``), never a setting.
RESERVED_SETTINGS = frozenset({"model", "messages", "stream", "n", "tools", "functions"})
MAX_ERROR_BODY_BYTES = 2048  # an upstream error body is stored and shown as this excerpt
# The HTTP statuses whose answer may say a request parameter is refused.
REJECTED_PARAMETER_STATUSES = (400, 422)
_QUOTED = r"['\"`]([A-Za-z_][\w.\-\[\]]*)['\"`]"
_REJECTED_PARAMETER_MESSAGES = (
    # "Unsupported parameter: 'temperature' is not supported with this model."
    re.compile(
        r"\b(?:unsupported|unrecognized|unknown|unexpected|extra)\s+(?:request\s+)?"
        r"(?:parameter|argument|field|keyword|value)s?\b[^'\"`\n]{0,40}" + _QUOTED,
        re.IGNORECASE,
    ),
    # "'logprobs' is not supported with this model"
    re.compile(
        _QUOTED + r"\s+(?:is|are)\s+(?:not\s+supported|unsupported|not\s+permitted|"
        r"not\s+allowed|not\s+recognized)",
        re.IGNORECASE,
    ),
    # "Unrecognized request argument supplied: functions"
    re.compile(r"unrecognized request arguments? supplied:\s*([A-Za-z_][\w.\-]*)", re.IGNORECASE),
)
_REJECTED_WORDS = re.compile(
    r"unsupported (?:parameter|value)|unrecognized request argument|"
    r"extra inputs are not permitted|not supported with this model",
    re.IGNORECASE,
)

Sleep = Callable[[float], Awaitable[None]]


API_KEY_ENV_PATTERN = r"[A-Z][A-Z0-9_]*_API_KEY"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
# A value that is a key itself, not a variable's name: a provider's key prefix (OpenAI
# ``sk-``, Anthropic ``sk-ant-``, Groq ``gsk_``, Hugging Face ``hf_``, GitHub ``ghp_``...),
# or a long run of letters and digits with lower case in it (no variable name has that).
_SECRET_LOOKING = re.compile(
    r"(?:sk|gsk|pk|rk|hf|ghp|gho|github_pat|xox[abpr]|AIza)[-_]|(?=.*[a-z])(?=.*[0-9])"
    r"[A-Za-z0-9_\-]{24,}",
)


def looks_like_a_key(value: object) -> bool:
    """Whether ``value`` looks like an API key itself rather than a variable's name: a
    surface that refuses it must not show it back (a form clears the field)."""
    return isinstance(value, str) and bool(_SECRET_LOOKING.match(value.strip()))


def api_key_env_problem(name: object) -> str | None:
    """Why ``name`` may not be the environment variable whose value is sent as the bearer
    key, or None when it may. ``None`` (or ``false``, TOML's way to say it) may: a keyless
    endpoint (no Authorization header).
    A name must match ``ASSAY["API_KEY_ENV_PATTERN"]`` (default ``[A-Z][A-Z0-9_]*_API_KEY``,
    e.g. ``OPENAI_API_KEY``): whoever configures a target or a judge chooses the URL the key
    goes to, so any other variable of the worker's environment (``SECRET_KEY``,
    ``DATABASE_URL``, ``HOME``) must not be sendable. A value that looks like a key itself
    (``sk-...``) is refused without repeating it: the field takes a name, never a secret."""

    if name is None or name is False:  # false: config as code's null (TOML has none)
        return None
    if not isinstance(name, str) or not name:
        return "expected an environment variable name, or null for an endpoint that takes no key"
    if looks_like_a_key(name):
        return (
            "looks like a key itself: give the name of the environment variable that holds "
            "the key (e.g. OPENAI_API_KEY), never the key"
        )
    pattern = getattr(settings, "ASSAY", {}).get("API_KEY_ENV_PATTERN", API_KEY_ENV_PATTERN)
    if not re.fullmatch(pattern, name):
        return (
            f"{name[:100]!r} is not an API key variable: the name must match "
            f"{pattern!r} (e.g. OPENAI_API_KEY)"
        )
    return None


@dataclass(frozen=True)
class OpenAIConfig:
    """Parsed target config. Times in seconds; ``settings`` is passed through to the request
    body (temperature, max_tokens, seed, ...)."""

    base_url: str
    model: str
    prompt_template: str
    system_prompt: str | None = None
    api_key_env: str | None = DEFAULT_API_KEY_ENV  # None: a keyless endpoint
    settings: dict[str, Any] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 300.0
    tool_loop: ToolLoopConfig | None = None
    rpm: float | None = None
    tpm: float | None = None
    limit_key: str | None = None

    @classmethod
    def parse(cls, config: dict) -> OpenAIConfig:
        """Validate a target config dict; raises ``DomainError`` naming the field."""
        known = (set(cls.__dataclass_fields__) - {"tool_loop"}) | {"kind", "prompt_revision"}
        known |= TOOL_LOOP_FIELDS
        unknown = sorted(set(config) - known)
        if unknown:
            raise DomainError("unknown field", field=f"target.{unknown[0]}")
        base_url = _required_str(config, "base_url")
        if not base_url.startswith(("http://", "https://")):
            raise DomainError("must start with http:// or https://", field="target.base_url")
        egress = endpoint_url_problem(base_url)
        if egress:
            raise DomainError(egress, field="target.base_url")
        template = _required_str(config, "prompt_template")
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
        api_key_env = config.get("api_key_env", DEFAULT_API_KEY_ENV)
        api_key_env = None if api_key_env is False else api_key_env  # TOML has no null
        problem = api_key_env_problem(api_key_env)
        if problem:
            raise DomainError(f"{problem}", field="target.api_key_env")
        parsed_config = cls(
            base_url=base_url.rstrip("/"),
            model=_required_str(config, "model"),
            prompt_template=template,
            system_prompt=system_prompt,
            api_key_env=api_key_env,
            settings=dict(settings),
            concurrency=_number(
                config,
                "concurrency",
                concurrency_default(config),
                int,
                minimum=1,
                maximum=MAX_CONCURRENCY,
            ),
            timeout_s=_number(config, "timeout_s", 60.0, float, minimum=0.001, maximum=MAX_SECONDS),
            max_attempts=_number(config, "max_attempts", 4, int, minimum=1, maximum=MAX_ATTEMPTS),
            backoff_base_s=_number(
                config, "backoff_base_s", 1.0, float, minimum=0.0, maximum=MAX_SECONDS
            ),
            backoff_max_s=_number(
                config, "backoff_max_s", 60.0, float, minimum=0.0, maximum=MAX_SECONDS
            ),
            retry_after_max_s=_number(
                config, "retry_after_max_s", 300.0, float, minimum=0.0, maximum=MAX_SECONDS
            ),
            tool_loop=ToolLoopConfig.parse(config),
            **limit_settings_parse(config, prefix="target"),
        )
        return parsed_config


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


def _required_str(config: dict, name: str) -> str:
    value = config.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DomainError("required, a non-empty string", field=f"target.{name}")
    return value


# Upper bounds of a target's numbers. Every one is far above any real use, and each keeps
# a typo or a hostile config from taking the server down: the target is built once to
# validate a run's config in the web process (``target_validate``), and ``concurrency``
# 10**11 built ceil(10**11 / 8) HTTP clients there, filling memory until the process died.
MAX_ATTEMPTS = 20  # HTTP requests per call, retries included
MAX_SECONDS = 3600.0  # timeout_s, backoff_base_s, backoff_max_s, retry_after_max_s


def _number(
    config: dict, name: str, default: Any, kind: type, *, minimum: float, maximum: float
) -> Any:
    """``config[name]`` (else ``default``) as ``kind``, from ``minimum`` to ``maximum``
    inclusive; raises ``DomainError`` with field ``target.<name>`` for a boolean, a
    non-number, a non-integer where ``kind`` is ``int``, NaN (a TOML config can spell it) or
    a value out of bounds."""
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DomainError(f"expected a number, got {value!r}", field=f"target.{name}")
    if not minimum <= value <= maximum:  # NaN fails both comparisons
        raise DomainError(
            f"must be from {minimum:g} to {maximum:g}, got {value!r:.40}", field=f"target.{name}"
        )
    if kind is int and value != int(value):
        raise DomainError(f"expected an integer, got {value!r}", field=f"target.{name}")
    return kind(value)


MAX_LIMIT_KEY_CHARS = 200


def limit_settings_parse(config: dict, *, prefix: str) -> dict[str, Any]:
    """The shared limiter's settings of a target config or a judge version's params:
    ``{"rpm": float | None, "tpm": float | None, "limit_key": str | None}``. ``rpm``/``tpm``
    are requests/tokens per minute, more than 0 (absent or null: not declared); ``limit_key``
    a non-empty name of at most ``MAX_LIMIT_KEY_CHARS``. Raises ``DomainError`` with field
    ``<prefix>.<name>``."""
    parsed: dict[str, Any] = {}
    for name in ("rpm", "tpm"):
        value = config.get(name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value < math.inf
        ):
            raise DomainError(
                f"expected a finite number above 0, got {value!r}", field=f"{prefix}.{name}"
            )
        parsed[name] = None if value is None else float(value)
    key = config.get("limit_key")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise DomainError("expected a non-empty string", field=f"{prefix}.limit_key")
    if key is not None and len(key) > MAX_LIMIT_KEY_CHARS:
        raise DomainError(
            f"at most {MAX_LIMIT_KEY_CHARS} characters, got {len(key)}",
            field=f"{prefix}.limit_key",
        )
    parsed["limit_key"] = key
    return parsed


def prompt_render(template: str, case: CaseInput) -> str:
    """The user message for ``case``: ``string.Template`` substitution of ``$input``,
    ``$expected``, ``$key``, ``$context``, ``$tags``, ``$attempt`` (``$$`` is a literal
    ``$``; braces are plain text). ``template`` was checked by ``prompt_template_check``.

    Case text is inserted as data in one pass and never re-read as a template, so ``{foo}``
    or ``$input`` inside a case comes out literally. JSON values (an object input, a
    non-string expected) are inserted as compact JSON; ``$context`` is each document as
    ``[id] text`` on its own line; ``$tags`` is comma-separated.
    """
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


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP-date,
    RFC 9110 §10.2.3); None when absent or unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())


def provider_message(body: Any, text: str) -> str:
    """The provider's own error words, at most ``MAX_ERROR_BODY_BYTES`` of UTF-8:
    ``error.message`` (OpenAI shape), ``error`` as a string, ``message``, ``detail[0].msg``
    (FastAPI/pydantic), or the raw body text."""
    words = None
    if isinstance(body, dict):
        err = body.get("error")
        detail = body.get("detail")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            words = err["message"]
        elif isinstance(err, str):
            words = err
        elif isinstance(body.get("message"), str):
            words = body["message"]
        elif isinstance(detail, str):
            words = detail
        elif isinstance(detail, list) and detail and isinstance(detail[0], dict):
            words = str(detail[0].get("msg") or "") or None
    return _utf8_prefix(words if words is not None else text) or "(empty body)"


def _utf8_prefix(text: str, limit: int = MAX_ERROR_BODY_BYTES) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (never inside a character)."""
    if len(text) * 4 <= limit:
        return text
    return text.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")


def error_body_excerpt(body: Any, text: str) -> Any:
    """What is stored of an upstream error body (``raw_response["body"]``): the parsed body
    when its text is at most ``MAX_ERROR_BODY_BYTES`` (2 KB) of UTF-8, else
    ``{"excerpt": <its first 2 KB>, "truncated": true, "bytes": <its size>}``: a 200 KB
    error page is neither stored nor shown whole."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_ERROR_BODY_BYTES:
        return body if body is not None else text
    return {"excerpt": _utf8_prefix(text), "truncated": True, "bytes": size}


def rejected_parameter_name(status: int, body: Any, message: str) -> str | None:
    """The request parameter a provider's answer refuses, or None when it is another error.

    Only a 400 or 422 can (``REJECTED_PARAMETER_STATUSES``). Read from, in order:
    ``error.param`` (OpenAI); a FastAPI/pydantic 422 ``detail`` item whose ``loc`` is
    ``["body", name]`` and whose ``msg`` or ``type`` says the input is extra or not permitted;
    the name quoted in the message ("Unsupported parameter: 'temperature' ...", "'logprobs'
    is not supported", "Unrecognized request argument supplied: functions"). ``""`` when
    the message says a parameter is refused without naming it. A name under ``messages`` is
    about one case's content, not a setting the model refuses: None ("invalid" values are
    left out for the same reason)."""
    name = _rejected_parameter_name(status, body, message)
    return None if name is not None and name.startswith("messages") else name


def _rejected_parameter_name(status: int, body: Any, message: str) -> str | None:
    if status not in REJECTED_PARAMETER_STATUSES:
        return None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("param"), str) and err["param"]:
        return err["param"]
    detail = body.get("detail") if isinstance(body, dict) else None
    for item in detail if isinstance(detail, list) else []:
        if not isinstance(item, dict):
            continue
        loc, why = item.get("loc"), f"{item.get('msg', '')} {item.get('type', '')}".lower()
        extra = "extra" in why or "not permitted" in why or "forbidden" in why
        if extra and isinstance(loc, list) and len(loc) >= 2 and loc[0] == "body":
            return str(loc[1])
    for pattern in _REJECTED_PARAMETER_MESSAGES:
        match = pattern.search(message)
        if match:
            return match.group(1)
    return "" if _REJECTED_WORDS.search(message) else None


@dataclass
class _Attempt:
    """One HTTP attempt's outcome: a result (final) or a retryable failure."""

    result: TargetResult | None = None
    retry_kind: str | None = None
    retry_message: str = ""
    retry_after_s: float | None = None
    raw: Any = None
    outcome: Outcome | None = None  # what the answer teaches the limiter


class OpenAITarget:
    """Chat completions over HTTP; see the module docstring for the client and retries.

    ``sleep`` (default ``asyncio.sleep``) and ``rng`` are injectable so tests run the
    retry schedule on a fake clock; ``pricer`` (an async ``model -> Price | None``, default
    the price table) prices a tool loop's model calls.
    """

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
        self._rng = rng or random.Random()
        self._semaphore = asyncio.Semaphore(config.concurrency)
        # The endpoint's shared limit (evals.runner.limiter): every wait, the retries' too,
        # goes through its clock.
        self.limiter = Limiter(
            key=endpoint_key(config.base_url, config.model, config.limit_key),
            capacity=config.concurrency,
            rpm=config.rpm,
            tpm=config.tpm,
            sleep=sleep or asyncio.sleep,
        )
        self._sleep: Sleep = self.limiter.sleep
        # The first rejected-parameter error while no call has been answered: later calls
        # of this instance end with it, unsent (module docstring).
        self._refused: TargetResult | None = None
        self._answered = False
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.http = JsonPoster(
            f"{config.base_url}/chat/completions",
            headers=headers,
            timeout_s=config.timeout_s,
            max_connections=config.concurrency,
        )
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
        """The JSON body sent for ``case``: model, messages, then the settings as given."""
        messages = []
        if self.config.system_prompt:
            messages.append({"role": "system", "content": self.config.system_prompt})
        messages.append(
            {"role": "user", "content": prompt_render(self.config.prompt_template, case)}
        )
        return {"model": self.config.model, "messages": messages, **self.config.settings}

    def backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Wait before retry number ``attempt`` (1-based), in seconds: "equal jitter",
        half of min(max, base × 2^(attempt−1)) plus a uniform draw over the other half
        (AWS Architecture Blog, "Exponential Backoff and Jitter", 2015), and never less
        than ``Retry-After``."""
        cap = min(self.config.backoff_max_s, self.config.backoff_base_s * 2 ** (attempt - 1))
        wait = cap / 2 + self._rng.uniform(0, cap / 2)
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return wait

    async def call(self, case: CaseInput) -> TargetResult:
        """One trial: up to ``max_attempts`` HTTP attempts; never raises for provider
        failures. ``latency_ms`` is wall-clock over all attempts and waits. With tools, the
        tool loop's trial (``tool_loop``): many calls, a trajectory and a final state."""
        body = self.request_body(case)
        if self._tool_loop is not None:
            return result_storable(await self._tool_loop.run(case, body))
        return replace(await self.call_body(body), request=body)

    async def call_body(self, body: dict[str, Any]) -> TargetResult:
        """Send a prebuilt chat-completions ``body`` with the same retries and error kinds as
        ``call`` (the judge client sends its own bodies through this). The result is
        storable text (``result_storable``): the reply boundary of targets and judges."""
        if self._refused is not None and not self._answered:
            return replace(
                self._refused,
                raw_response={**self._refused.raw_response, "not_sent": True},
                attempts=0,
                latency_ms=0.0,
            )
        result = result_storable(await self._call_body(body))
        if result.ok or result.error_kind != "rejected_parameter":
            self._answered = self._answered or result.ok
        elif self._refused is None:
            self._refused = result
        return result

    async def _call_body(self, body: dict[str, Any]) -> TargetResult:
        started = time.perf_counter()
        last: _Attempt | None = None
        for attempt in range(1, self.config.max_attempts + 1):
            async with self._semaphore:
                estimate = tokens_estimate(body)
                try:
                    # A stopped call (its run cancelled, ``call_stop``) makes no new attempt:
                    # checked before each one, and a wait for the limiter wakes on it.
                    slot = await unless_stopped(self.limiter.acquire(estimate))
                except Stopped as stopped:
                    if stopped.value is not None:
                        await self.limiter.release(stopped.value, None)
                    return self._stopped(last, attempt - 1, started)
                if attempt == 1:
                    call_sending()  # from here on the call cannot be withdrawn
                last = None
                try:
                    last = await self._attempt(body, estimate)
                finally:
                    await self.limiter.release(slot, last.outcome if last else None)
            if last.result is not None:
                return _with(last.result, started=started, attempts=attempt)
            if attempt == self.config.max_attempts:
                break
            if (
                last.retry_after_s is not None
                and last.retry_after_s > self.config.retry_after_max_s
            ):
                break  # the provider asks for a wait longer than we are willing to hold
            try:
                await unless_stopped(self._sleep(self.backoff_s(attempt, last.retry_after_s)))
            except Stopped:
                return self._stopped(last, attempt, started)
        assert last is not None
        error = f"{last.retry_kind} after {attempt} attempts: {last.retry_message}"
        return TargetResult(
            output="",
            raw_response=last.raw,
            error=error,
            error_kind=last.retry_kind,
            model=self.config.model,
            attempts=attempt,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def _stopped(self, last: _Attempt | None, attempts: int, started: float) -> TargetResult:
        """The result of a call stopped before attempt ``attempts + 1`` (``call_stop``):
        error kind ``cancelled``, the attempts made and the last one's failure kept."""
        before = f"; last: {last.retry_kind}: {last.retry_message}" if last is not None else ""
        return TargetResult(
            output="",
            raw_response=last.raw if last is not None else None,
            error=f"{CANCELLED_KIND}: stopped before attempt {attempts + 1}{before}",
            error_kind=CANCELLED_KIND,
            model=self.config.model,
            attempts=attempts,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def _attempt(self, body: dict[str, Any], estimate: float = 0.0) -> _Attempt:
        try:
            response = await self.http.post(body)
        except HttpFailure as exc:
            if exc.timeout:
                return _Attempt(
                    retry_kind="timeout",
                    retry_message=f"no response within {self.config.timeout_s:g} s ({exc.name})",
                    raw={"error": "timeout", "timeout_s": self.config.timeout_s},
                )
            return _Attempt(
                retry_kind="connection_error",
                retry_message=f"{exc.name}: {exc.detail}",
                raw={"error": "connection_error", "detail": exc.detail},
            )
        attempt = self._read(response, tools="tools" in body)
        attempt.outcome = self._outcome(response, attempt, estimate)
        return attempt

    @staticmethod
    def _outcome(response: HttpAnswer, attempt: _Attempt, estimate: float) -> Outcome:
        """What the answer teaches the limiter: the rate-limit headers, and the real tokens
        against the estimate (a 429 was not counted: its whole estimate is given back)."""
        limited = response.status == 429
        if limited:
            delta = -estimate
        elif attempt.result is not None and attempt.result.ok:
            used = (attempt.result.input_tokens or 0) + (attempt.result.output_tokens or 0)
            delta = used - estimate if used else 0.0
        else:
            delta = 0.0
        return outcome_read(
            response.headers,
            limited=limited,
            retry_after_s=attempt.retry_after_s,
            tokens_delta=delta,
        )

    def _read(self, response: HttpAnswer, *, tools: bool = False) -> _Attempt:
        text = response.text
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = None
        status = response.status
        if status != 200:
            message = provider_message(body, text)
            raw = {"status": status, "body": error_body_excerpt(body, text)}
            if status == 429:
                return _Attempt(
                    retry_kind="rate_limited",
                    retry_message=message,
                    retry_after_s=_retry_after(response.headers),
                    raw=raw,
                )
            if status >= 500:
                return _Attempt(
                    retry_kind=f"server_error {status}",
                    retry_message=message,
                    retry_after_s=_retry_after(response.headers),
                    raw=raw,
                )
            param = rejected_parameter_name(status, body, message)
            if param is not None:
                model = self.config.model
                what = f"parameter {param!r}" if param else "a parameter"
                raw["rejected_parameter"] = param
                message = f"model {model!r} refuses {what}: {message}"
                return _Attempt(result=_errored("rejected_parameter", message, raw, model))
            kind = f"client_error {status}"
            return _Attempt(result=_errored(kind, message, raw, self.config.model))
        return _Attempt(result=self._completion(body, text, tools=tools))

    def _completion(self, body: Any, text: str, *, tools: bool = False) -> TargetResult:
        model = self.config.model
        if not isinstance(body, dict):
            raw = {"status": 200, "body": error_body_excerpt(None, text)}
            return _errored("malformed_response", "the 200 body is not a JSON object", raw, model)
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raw = _malformed_raw(body, text)
            return _errored("malformed_response", "the reply has no choices", raw, model)
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if tools and isinstance(calls, list) and calls:
            content = content if isinstance(content, str) else ""  # the calls are the answer
        elif not isinstance(content, str) or not content:
            refusal = message.get("refusal") if isinstance(message, dict) else None
            why = f"refusal: {refusal}" if isinstance(refusal, str) and refusal else "empty content"
            raw = _malformed_raw(body, text)
            return _errored("malformed_response", _utf8_prefix(f"the reply has {why}"), raw, model)
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        answered_by = body.get("model") if isinstance(body.get("model"), str) else model
        return TargetResult(
            output=content,
            raw_response=body,
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            model=answered_by,
        )

    async def aclose(self) -> None:
        """Close the HTTP client's connections and the limiter's store client (and let go of
        the tool threads: a sync tool still running past its timeout is left to end on its
        own)."""
        await self.http.aclose()
        await self.limiter.aclose()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def tokens_estimate(body: dict[str, Any]) -> float:
    """Model tokens a request may use, for a ``tpm`` bucket, before its answer says: its
    message text at 4 characters a token plus its ``max_tokens`` (or
    ``max_completion_tokens``) when set, the estimate of OpenAI's cookbook
    (``api_request_parallel_processor.py``, ``num_tokens_consumed_from_request``) without a
    tokenizer. Corrected by the answer's ``usage`` (``Outcome.tokens_delta``)."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
    completion = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    if not isinstance(completion, int | float) or isinstance(completion, bool):
        completion = 0
    return chars / 4 + completion


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait an answer asks for: ``retry-after-ms`` when sent, else ``Retry-After``."""
    from_ms = retry_after_ms_seconds(headers)
    return from_ms if from_ms is not None else retry_after_seconds(headers.get("Retry-After"))


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _malformed_raw(body: dict, text: str) -> Any:
    """A malformed 200's stored body: the body itself when it is at most
    ``MAX_ERROR_BODY_BYTES`` (the judge client reads its choices for a refusal), else
    ``{"status": 200, "body": <excerpt>}`` (``error_body_excerpt``)."""
    excerpt = error_body_excerpt(body, text)
    return body if excerpt is body else {"status": 200, "body": excerpt}


def _errored(kind: str, message: str, raw: Any, model: str) -> TargetResult:
    return TargetResult(
        output="", raw_response=raw, error=f"{kind}: {message}", error_kind=kind, model=model
    )


def _with(result: TargetResult, *, started: float, attempts: int) -> TargetResult:
    return replace(result, attempts=attempts, latency_ms=(time.perf_counter() - started) * 1000)
