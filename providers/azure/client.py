"""The Azure OpenAI chat client: OpenAI's chat completions (``providers.openai.client.ChatClient``:
body, answers, errors) POSTed to ``<base_url>/openai/deployments/<deployment>/chat/completions
?api-version=<version>`` with the key in ``api-key`` (none when keyless). One difference in
reading: a prompt stopped by Azure's content filter is a 400 naming ``"param": "prompt"``, which
is no refused parameter (``rejected_parameter_name``)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from providers import answers
from providers.answers import Attempt
from providers.azure.endpoint import AzureDeployment
from providers.client import Sleep
from providers.endpoint import EndpointConfig
from providers.limiter import endpoint_key
from providers.openai.answers import completion_read
from providers.openai.client import ChatClient
from providers.transport import HttpAnswer

# ``error.code`` of a 400 whose prompt Azure's content filter stopped.
CONTENT_FILTER_CODE = "content_filter"


def rejected_parameter_name(status: int, body: Any, message: str) -> str | None:
    """``providers.answers.rejected_parameter_name``, but None for a content filter's 400 (its
    ``param`` is ``"prompt"``): one case's prompt, not a setting the deployment refuses, so the
    client goes on sending the other cases (a ``client_error 400``)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("code") == CONTENT_FILTER_CODE:
        return None
    return answers.rejected_parameter_name(status, body, message)


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

    def answer_read(self, response: HttpAnswer, body: dict[str, Any]) -> Attempt:
        """As ``ChatClient``'s, a content filter's 400 not a refused parameter."""
        model, tools = self.config.model, "tools" in body
        return answers.answer_read(
            response,
            model=model,
            reply_read=lambda reply, text: completion_read(reply, text, model=model, tools=tools),
            parameter_name=rejected_parameter_name,
        )
