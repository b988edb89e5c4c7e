"""Which protocol a model endpoint speaks: a target's or a judge version's ``provider``, its own
settings (``Provider``), and the client that speaks it (``Provider.client``)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from providers.anthropic import endpoint as anthropic_endpoint
from providers.anthropic.client import MessagesClient
from providers.azure import endpoint as azure_endpoint
from providers.azure.client import AzureChatClient
from providers.client import EndpointClient, Sleep
from providers.endpoint import DEFAULT_API_KEY_ENV, EndpointConfig
from providers.openai.client import ChatClient
from providers.shown import value_shown

# The protocols, the first the default: OpenAI-compatible chat completions, Anthropic Messages,
# Azure OpenAI (OpenAI's chat completions at a deployment's URL).
PROVIDERS = ("openai", "anthropic", "azure")
# The fields each provider alone may hold beside the endpoint's.
PROVIDER_FIELDS = {"anthropic": ("anthropic_version",), "azure": azure_endpoint.FIELDS}
# The key's variable when a config names none.
KEY_ENV_DEFAULTS = {
    "openai": DEFAULT_API_KEY_ENV,
    "anthropic": anthropic_endpoint.DEFAULT_API_KEY_ENV,
    "azure": azure_endpoint.DEFAULT_API_KEY_ENV,
}


@dataclass(frozen=True)
class Provider:
    """A parsed ``provider``: its ``name`` (one of ``PROVIDERS``), on Anthropic the
    ``anthropic-version`` header's value, on Azure the deployment and API version (else None)."""

    name: str = PROVIDERS[0]
    anthropic_version: str | None = None
    azure: azure_endpoint.AzureDeployment | None = None

    @property
    def api_key_env_default(self) -> str:
        """The key's variable when the config names none (``KEY_ENV_DEFAULTS``)."""
        return KEY_ENV_DEFAULTS[self.name]

    def client(
        self,
        config: EndpointConfig,
        *,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> EndpointClient:
        """The client speaking this protocol to ``config``'s endpoint."""
        if self.anthropic_version is not None:
            return MessagesClient(config, version=self.anthropic_version, sleep=sleep, rng=rng)
        if self.azure is not None:
            return AzureChatClient(config, deployment=self.azure, sleep=sleep, rng=rng)
        return ChatClient(config, sleep=sleep, rng=rng)


def provider_parse(config: Mapping[str, Any], *, prefix: str) -> Provider:
    """The ``Provider`` of ``config``: ``provider`` one of ``PROVIDERS`` (``openai`` when unset);
    ``anthropic_version`` only for ``anthropic`` (its default when unset); ``deployment`` and
    ``api_version`` only, and both required, for ``azure``. Raises ``DomainError`` on
    ``<prefix>.provider`` for an unknown provider, and on ``<prefix>.<name>`` for a provider's
    field malformed, missing or given to another provider."""
    name = config.get("provider", PROVIDERS[0])
    if name not in PROVIDERS:
        raise DomainError(
            f"unknown provider {value_shown(name, 60)} (known: {', '.join(PROVIDERS)})",
            field=f"{prefix}.provider",
        )
    for owner, fields in PROVIDER_FIELDS.items():
        given = [field for field in fields if field in config]
        if owner != name and given:
            raise DomainError(f'only with "provider": "{owner}"', field=f"{prefix}.{given[0]}")
    if name == "anthropic":
        return Provider(
            name, anthropic_version=anthropic_endpoint.version_parse(config, prefix=prefix)
        )
    if name == "azure":
        return Provider(name, azure=azure_endpoint.deployment_parse(config, prefix=prefix))
    return Provider(name)
