"""The endpoint part of a model config, for every protocol, a target and a judge version alike
(``EndpointConfig.parse``: ``base_url_parse``, ``endpoint_settings_parse``,
``limit_settings_parse``). Errors are ``DomainError`` on ``<prefix>.<name>``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar
from urllib.parse import urlsplit

from django.conf import settings

from core.egress import endpoint_url_problem
from core.errors import DomainError, value_shown

API_KEY_ENV_PATTERN = r"[A-Z][A-Z0-9_]*_API_KEY"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
# A value that is a key itself, not a variable's name: a provider's key prefix (OpenAI
# ``sk-``, Anthropic ``sk-ant-``, Groq ``gsk_``, Hugging Face ``hf_``, GitHub ``ghp_``...),
# or a long run of letters and digits with lower case in it (no variable name has that).
_SECRET_LOOKING = re.compile(
    r"(?:sk|gsk|pk|rk|hf|ghp|gho|github_pat|xox[abpr]|AIza)[-_]|(?=.*[a-z])(?=.*[0-9])"
    r"[A-Za-z0-9_\-]{24,}",
)

# The most calls in flight a caller may ask for (``concurrency``, a target of any kind or a
# judge). Far above real use (the shared mock's stress runs use 64 to 128), and it keeps a
# typo or a hostile config from taking a process down: a chunk starts one coroutine and
# claims two trials per call in flight.
MAX_CONCURRENCY = 1024
# Upper bounds of an endpoint's numbers, far above any real use: a typo or a hostile config
# must not take the web process down when it builds the target to validate a run's config
# (``target_validate``).
MAX_ATTEMPTS = 20  # HTTP requests per call, retries included
MAX_SECONDS = 3600.0  # timeout_s, backoff_base_s, backoff_max_s, retry_after_max_s
MAX_LIMIT_KEY_CHARS = 200

N = TypeVar("N", int, float)


def looks_like_a_key(value: object) -> bool:
    """Whether ``value`` looks like a key itself, which a surface must not show back."""
    return isinstance(value, str) and bool(_SECRET_LOOKING.match(value.strip()))


def _shown(value: object) -> str:
    """A refused number as the input wrote it (``core.errors.value_shown``), never a key."""
    if looks_like_a_key(value):
        return "a value that looks like a key (not shown)"
    return value_shown(value, limit=40)


def api_key_env_problem(name: object) -> str | None:
    """Why ``name`` may not be the variable sent as the bearer key, or None (None or ``false``:
    keyless).
    A name must match ``ASSAY["API_KEY_ENV_PATTERN"]`` (``[A-Z][A-Z0-9_]*_API_KEY``): the
    configurer picks the URL, so ``SECRET_KEY`` or ``DATABASE_URL`` must not be sendable. A
    value that looks like a key is refused without repeating it."""

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


class EndpointSettings(TypedDict):
    """The key's variable (None: keyless), model, calls in flight, seconds, attempts per call."""

    api_key_env: str | None
    model: str
    concurrency: int
    timeout_s: float
    max_attempts: int
    backoff_base_s: float
    backoff_max_s: float
    retry_after_max_s: float


class LimitSettings(TypedDict):
    """``rpm``/``tpm`` (None: not declared) and ``limit_key``."""

    rpm: float | None
    tpm: float | None
    limit_key: str | None


@dataclass(frozen=True)
class EndpointConfig:
    """Times in seconds; ``base_url`` without trailing slash; ``api_key_env`` None: no
    Authorization header; ``concurrency``: calls in flight over every worker."""

    base_url: str
    model: str
    api_key_env: str | None
    concurrency: int
    timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 300.0
    rpm: float | None = None
    tpm: float | None = None
    limit_key: str | None = None

    @classmethod
    def parse(
        cls, config: Mapping[str, Any], *, prefix: str, concurrency_default: int
    ) -> EndpointConfig:
        """The endpoint part of ``config``; ``concurrency_default`` when unset. Raises
        ``DomainError``."""
        return cls(
            base_url=base_url_parse(config, prefix=prefix),
            **endpoint_settings_parse(
                config, prefix=prefix, concurrency_default=concurrency_default
            ),
            **limit_settings_parse(config, prefix=prefix),
        )


# The keys of a config that ``EndpointConfig.parse`` reads.
ENDPOINT_FIELDS = frozenset(EndpointConfig.__dataclass_fields__)


def base_url_parse(config: Mapping[str, Any], *, prefix: str) -> str:
    """``base_url`` without trailing slash: an http(s) URL ``core.egress`` allows. Raises
    ``DomainError`` on ``<prefix>.base_url``."""
    base_url = required_str(config, "base_url", prefix=prefix)
    if not base_url.startswith(("http://", "https://")):
        raise DomainError("must start with http:// or https://", field=f"{prefix}.base_url")
    if problem := base_url_secret_problem(base_url):
        raise DomainError(problem, field=f"{prefix}.base_url")
    egress = endpoint_url_problem(base_url)
    if egress:
        raise DomainError(egress, field=f"{prefix}.base_url")
    return base_url.rstrip("/")


def base_url_secret_problem(base_url: str) -> str | None:
    """Why ``base_url`` may not be stored, or None: a user or password in it, or a query or
    fragment (where keys travel: ``?key=...``). A run and a judge version keep their URL and
    show it to every role, so a secret there would be shown; the message never repeats it."""
    try:
        parts = urlsplit(base_url)
        has_user = parts.username is not None or parts.password is not None
    except ValueError:
        return "is not a URL"
    if has_user:
        return (
            "holds a user or password: give the key through the environment variable "
            "api_key_env names, never in the URL (the URL is stored and shown)"
        )
    if parts.query or parts.fragment or "?" in base_url or "#" in base_url:
        return (
            "has a query or fragment: give the endpoint's base URL only; a key goes in the "
            "environment variable api_key_env names (the URL is stored and shown)"
        )
    return None


def endpoint_settings_parse(
    config: Mapping[str, Any],
    *,
    prefix: str,
    concurrency_default: int,
    api_key_env_default: str = DEFAULT_API_KEY_ENV,
) -> EndpointSettings:
    """``api_key_env`` (``false``: null; unset: ``api_key_env_default``), model, ``concurrency``
    (1 to ``MAX_CONCURRENCY``),
    ``timeout_s`` (60), ``max_attempts`` (4), ``backoff_base_s`` (1), ``backoff_max_s`` (60),
    ``retry_after_max_s`` (300), seconds at most ``MAX_SECONDS``. Raises ``DomainError``."""
    api_key_env = config.get("api_key_env", api_key_env_default)
    api_key_env = None if api_key_env is False else api_key_env  # TOML has no null
    problem = api_key_env_problem(api_key_env)
    if problem:
        raise DomainError(f"{problem}", field=f"{prefix}.api_key_env")
    return {
        "api_key_env": api_key_env,
        "model": required_str(config, "model", prefix=prefix),
        "concurrency": number(
            config,
            "concurrency",
            concurrency_default,
            int,
            minimum=1,
            maximum=MAX_CONCURRENCY,
            prefix=prefix,
        ),
        "timeout_s": number(
            config, "timeout_s", 60.0, float, minimum=0.001, maximum=MAX_SECONDS, prefix=prefix
        ),
        "max_attempts": number(
            config, "max_attempts", 4, int, minimum=1, maximum=MAX_ATTEMPTS, prefix=prefix
        ),
        "backoff_base_s": number(
            config, "backoff_base_s", 1.0, float, minimum=0.0, maximum=MAX_SECONDS, prefix=prefix
        ),
        "backoff_max_s": number(
            config, "backoff_max_s", 60.0, float, minimum=0.0, maximum=MAX_SECONDS, prefix=prefix
        ),
        "retry_after_max_s": number(
            config,
            "retry_after_max_s",
            300.0,
            float,
            minimum=0.0,
            maximum=MAX_SECONDS,
            prefix=prefix,
        ),
    }


def limit_settings_parse(config: Mapping[str, Any], *, prefix: str) -> LimitSettings:
    """``{"rpm", "tpm", "limit_key"}``: per-minute limits above 0 (None: not declared), a key of
    at most ``MAX_LIMIT_KEY_CHARS``. Raises ``DomainError``."""
    per_minute: dict[str, float | None] = {}
    for name in ("rpm", "tpm"):
        value = config.get(name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value < math.inf
        ):
            raise DomainError(
                f"expected a finite number above 0, got {_shown(value)}", field=f"{prefix}.{name}"
            )
        per_minute[name] = None if value is None else float(value)
    key = config.get("limit_key")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise DomainError("expected a non-empty string", field=f"{prefix}.limit_key")
    if key is not None and len(key) > MAX_LIMIT_KEY_CHARS:
        raise DomainError(
            f"at most {MAX_LIMIT_KEY_CHARS} characters, got {len(key)}",
            field=f"{prefix}.limit_key",
        )
    return {"rpm": per_minute["rpm"], "tpm": per_minute["tpm"], "limit_key": key}


def required_str(config: Mapping[str, Any], name: str, *, prefix: str) -> str:
    """``config[name]``, not blank; else ``DomainError``."""
    value = config.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DomainError("required, a non-empty string", field=f"{prefix}.{name}")
    return value


def number(
    config: Mapping[str, Any],
    name: str,
    default: N,
    kind: type[N],
    *,
    minimum: float,
    maximum: float,
    prefix: str,
) -> N:
    """``config[name]`` (else ``default``) as ``kind`` in [minimum, maximum]; ``DomainError`` for a
    bool, NaN, a non-number or non-integer ``int``, or out of bounds."""
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DomainError(f"expected a number, got {_shown(value)}", field=f"{prefix}.{name}")
    if not minimum <= value <= maximum:  # NaN fails both comparisons
        raise DomainError(
            f"must be from {minimum:g} to {maximum:g}, got {_shown(value)}",
            field=f"{prefix}.{name}",
        )
    if kind is int and value != int(value):
        raise DomainError(f"expected an integer, got {_shown(value)}", field=f"{prefix}.{name}")
    return kind(value)
