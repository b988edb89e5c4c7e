"""A run's target as pages show it: one ``ShownRow`` per setting, secrets masked
(``target_shown``, ``target_rows``).

The one home of what a target's snapshot (``Run.target``) shows to a reader: the run page,
the comparison page's config diff (``evals.target_diff``) and the API read it here. A run
never stores a key (``api_key_env`` is the NAME of a variable, shown as is); still, any string
that looks like a key (``providers.endpoint.looks_like_a_key``), any value under a name like
``api_key``, ``token``, ``secret``, ``password`` or ``authorization``, and the user and password
of a ``base_url`` are masked. Rows hold plain text: templates autoescape it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evals.runner.targets.base import concurrency_default
from providers.endpoint import looks_like_a_key
from providers.protocols import PROVIDERS

MASKED = "(not shown: looks like a secret)"
CREDENTIALS_MASKED = "(credentials not shown)"
# Keys holding prompt text: shown whole, diffed word by word (evals.target_diff).
TEMPLATE_KEYS = ("system_prompt", "prompt_template")
# Known keys in the order shown, with their labels; any other key follows, by name.
LABELS = {
    "kind": "Target kind",
    "provider": "Provider",
    "model": "Model",
    "base_url": "Base URL",
    "deployment": "Deployment",
    "api_version": "API version",
    "anthropic_version": "Anthropic version",
    "api_key_env": "API key variable",
    "path": "Callable",
    "system_prompt": "System prompt",
    "prompt_template": "Prompt template",
    "concurrency": "Concurrency",
    "tools": "Tools",
    "environment": "Environment",
    "max_steps": "Max steps",
    "seed": "Seed",
    "default_pass_probability": "Pass probability",
    "latency_ms": "Latency (ms)",
}
# A setting whose name says it holds a secret is masked whatever its value looks like.
_SECRET_NAME = re.compile(r"(?i)(api[-_]?key|token|secret|passw|authori[sz]ation|cookie)")
_NOT_SECRET_NAMES = {"api_key_env", "max_tokens", "max_completion_tokens", "max_output_tokens"}


@dataclass(frozen=True)
class ShownRow:
    """One setting: ``key`` (dotted for nested settings: ``settings.temperature``), ``label``,
    ``value`` (text, masked where needed; JSON text for numbers, lists and objects), ``raw``
    (the stored value, or the default in effect, for comparing; never rendered) and ``long``
    (a template: show as a block, diff by word)."""

    key: str
    label: str
    value: str
    raw: Any
    long: bool = False


def base_url_shown(url: str) -> str:
    """``url`` without its user and password (``https://u:p@h/v1`` -> ``https://(credentials not
    shown)@h/v1``) and with each query value masked; a key-looking URL is masked whole."""
    if looks_like_a_key(url):
        return MASKED
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{CREDENTIALS_MASKED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        query = "&".join(f"{p.split('=', 1)[0]}=…" if "=" in p else p for p in query.split("&"))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _masked(value: Any, *, name: str = "") -> Any:
    """``value`` with every string that looks like a key, and every value under a secret-looking
    name, replaced by ``MASKED`` (recursively through lists and objects)."""
    if name and name not in _NOT_SECRET_NAMES and _SECRET_NAME.search(name) and value:
        return MASKED
    if isinstance(value, str):
        return MASKED if looks_like_a_key(value) else value
    if isinstance(value, dict):
        return {k: _masked(v, name=str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _text(value: Any) -> str:
    """A masked value as text: strings as they are, the rest as JSON (``null`` for None)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _row(key: str, label: str, raw: Any) -> ShownRow:
    name = key.rsplit(".", 1)[-1]
    if name == "base_url" and isinstance(raw, str):
        return ShownRow(key, label, base_url_shown(raw), raw)
    if name == "api_key_env":  # a variable's NAME; None: the endpoint takes no key
        if raw is None or raw is False:
            return ShownRow(key, label, "none (the endpoint takes no key)", raw)
        return ShownRow(key, label, _text(_masked(raw)), raw)
    value = _text(_masked(raw, name=name))
    return ShownRow(key, label, value, raw, long=name in TEMPLATE_KEYS)


def target_rows(target: dict) -> dict[str, ShownRow]:
    """Key -> ``ShownRow`` for every setting of ``target`` (a ``Run.target`` snapshot), nested
    ``settings`` flattened (``settings.temperature``), in the order shown. Adds
    ``provider`` (``openai`` when the model target names none) and ``concurrency`` (the
    default when unset, ``evals.runner.targets.base``) so two runs compare on what ran."""
    target = target if isinstance(target, dict) else {}
    rows: dict[str, ShownRow] = {}
    kind = target.get("kind")
    for key, label in LABELS.items():
        if key in target:
            rows[key] = _row(key, label, target[key])
        elif key == "provider" and kind == "openai":
            rows[key] = ShownRow(key, label, PROVIDERS[0], PROVIDERS[0])
        elif key == "concurrency" and kind in ("openai", "callable"):
            calls = concurrency_default(target)
            rows[key] = ShownRow(key, label, f"{calls} (default)", calls)
    for key in sorted(k for k in target if k not in LABELS and k != "settings"):
        rows[key] = _row(key, key.replace("_", " ").capitalize(), target[key])
    settings = target.get("settings")
    if isinstance(settings, dict):
        for name in sorted(settings):
            rows[f"settings.{name}"] = _row(f"settings.{name}", f"Setting {name}", settings[name])
    elif settings is not None:
        rows["settings"] = _row("settings", "Settings", settings)
    return rows


def target_shown(target: dict) -> list[ShownRow]:
    """The rows of ``target`` as a page lists them (``target_rows`` in order); [] for an
    imported run's empty target."""
    return list(target_rows(target).values())
