"""Which protocol a model endpoint speaks: a target's or a judge version's ``provider``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import DomainError
from providers.anthropic import endpoint as anthropic_endpoint

# The protocols, the first the default: OpenAI-compatible chat completions, Anthropic Messages.
PROVIDERS = ("openai", "anthropic")


def provider_parse(config: Mapping[str, Any], *, prefix: str) -> tuple[str, str | None]:
    """``(provider, anthropic_version)`` of ``config``: ``provider`` one of ``PROVIDERS``
    (``openai`` when unset); the version only for ``anthropic`` (its default when unset).
    Raises ``DomainError`` on ``<prefix>.provider`` for an unknown provider and on
    ``<prefix>.anthropic_version`` for a bad version or one given to another provider."""
    provider = config.get("provider", PROVIDERS[0])
    if provider not in PROVIDERS:
        raise DomainError(
            f"unknown provider {provider!r:.60} (known: {', '.join(PROVIDERS)})",
            field=f"{prefix}.provider",
        )
    if provider != "anthropic":
        if "anthropic_version" in config:
            raise DomainError(
                'only with "provider": "anthropic"', field=f"{prefix}.anthropic_version"
            )
        return provider, None
    return provider, anthropic_endpoint.version_parse(config, prefix=prefix)
