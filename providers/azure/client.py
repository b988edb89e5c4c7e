"""The Azure OpenAI chat client: OpenAI's chat completions (``providers.openai.client.ChatClient``:
body, answers, errors) POSTed to ``<base_url>/openai/deployments/<deployment>/chat/completions
?api-version=<version>`` with the key in ``api-key`` (none when keyless)."""

from __future__ import annotations

import random
from dataclasses import replace

from providers.azure.endpoint import AzureDeployment
from providers.client import Sleep
from providers.endpoint import EndpointConfig
from providers.limiter import endpoint_key
from providers.openai.client import ChatClient


class AzureChatClient(ChatClient):
    """Chat completions to ``deployment`` at ``config``'s resource (``EndpointClient``). Azure
    limits each deployment apart, so the shared limiter's key is the deployment's URL and the
    model unless the config names a ``limit_key``."""

    def __init__(
        self,
        config: EndpointConfig,
        *,
        deployment: AzureDeployment,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.deployment = deployment
        self.path = deployment.path
        if config.limit_key is None:
            key = endpoint_key(f"{config.base_url}{deployment.root}", config.model)
            config = replace(config, limit_key=key)
        super().__init__(config, sleep=sleep, rng=rng)

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"api-key": api_key} if api_key else {}
