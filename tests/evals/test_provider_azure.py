"""The Azure OpenAI client (``providers.azure``): the URL, query and ``api-key`` header it sends,
OpenAI's body and answers, the shared limiter keyed by deployment and reading Azure's
``x-ratelimit-*`` headers; and an ``azure`` target's config refused by field name."""

from __future__ import annotations

import asyncio
import random

import pytest

from core.errors import DomainError
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAIConfig, OpenAITarget
from providers.azure.client import AzureChatClient
from providers.azure.endpoint import AzureDeployment
from tests.evals.test_provider_anthropic import FakeClock, FakePoster, answer, endpoint

pytestmark = pytest.mark.django_db

BASE = {
    "kind": "openai",
    "provider": "azure",
    "base_url": "https://myres.openai.azure.com",
    "deployment": "gpt4o-prod",
    "api_version": "2024-10-21",
    "model": "gpt-4o",
    "api_key_env": "ASSAY_TEST_API_KEY",
    "prompt_template": "Q: $input",
}
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
}


def _built(config: dict) -> tuple[dict, dict, str, str]:
    """The body for one case, the headers, the URL and the limiter's key of ``config``."""

    async def go():
        target = OpenAITarget(OpenAIConfig.parse(config))
        try:
            body = target.request_body(CaseInput(key="c1", input="2+2?"))
            http = target.client.http
            return body, dict(http.headers), str(http.url), target.client.limiter.key
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_it_posts_openais_body_to_the_deployments_url_with_the_key_in_api_key(monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", "test-key")
    body, headers, url, limit_key = _built({**BASE, "settings": {"temperature": 0.2}})
    assert url == (
        "https://myres.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions"
        "?api-version=2024-10-21"
    )
    assert headers["api-key"] == "test-key"
    assert "Authorization" not in headers
    assert body == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Q: 2+2?"}],
        "temperature": 0.2,
    }
    # Azure limits each deployment apart: two deployments of one model never share a bucket.
    assert limit_key == "https://myres.openai.azure.com/openai/deployments/gpt4o-prod|gpt-4o"
    assert _built({**BASE, "deployment": "gpt4o-batch"})[3] != limit_key
    assert _built({**BASE, "limit_key": "team-a"})[3] == "team-a"


def test_a_keyless_azure_target_sends_no_key_and_the_default_variable_is_azures(monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", "test-key")
    _, headers, _, _ = _built({**BASE, "api_key_env": None})
    assert "api-key" not in headers and "Authorization" not in headers
    defaults = {k: v for k, v in BASE.items() if k != "api_key_env"}
    assert OpenAIConfig.parse(defaults).api_key_env == "AZURE_OPENAI_API_KEY"


def test_the_reply_reads_as_openais_and_the_limiter_reads_x_ratelimit_headers():
    limited = answer(
        429,
        {
            "error": {
                "code": "429",
                "message": "Requests to the ChatCompletions_Create Operation "
                "have exceeded call rate limit.",
            }
        },
        **{
            "retry-after": "2",
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-limit-tokens": "90000",
        },
    )
    outcomes = []
    clock = FakeClock()

    async def go():
        client = AzureChatClient(
            endpoint(model="gpt-4o"),
            deployment=AzureDeployment(deployment="d", api_version="2024-10-21"),
            sleep=clock.sleep,
            rng=random.Random(1),
        )
        client.http = FakePoster([limited, answer(200, COMPLETION)])
        release = client.limiter.release

        async def recording(slot, outcome):
            outcomes.append(outcome)
            await release(slot, outcome)

        client.limiter.release = recording
        try:
            return await client.send({"model": "gpt-4o", "messages": []})
        finally:
            await client.aclose()

    reply = asyncio.run(go())
    assert (reply.ok, reply.output, reply.model, reply.attempts) == (
        True,
        "4",
        "gpt-4o-2024-08-06",
        2,
    )
    assert (reply.input_tokens, reply.output_tokens) == (9, 1)
    assert outcomes[0].limited and outcomes[0].retry_after_s == 2.0
    assert (outcomes[0].rpm_limit, outcomes[0].tpm_limit) == (60.0, 90000.0)
    assert clock.waits and clock.waits[0] >= 2.0


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"deployment": None}, "target.deployment", 'required with "provider": "azure"'),
        ({"deployment": "a/b"}, "target.deployment", "is not a deployment name"),
        ({"deployment": ".."}, "target.deployment", "is not a deployment name"),
        ({"deployment": "a..b"}, "target.deployment", "is not a deployment name"),
        ({"deployment": "a?x=1"}, "target.deployment", "is not a deployment name"),
        ({"deployment": "a#b"}, "target.deployment", "is not a deployment name"),
        ({"deployment": "a b"}, "target.deployment", "is not a deployment name"),
        ({"deployment": "a%2Fb"}, "target.deployment", "is not a deployment name"),
        ({"deployment": 7}, "target.deployment", "expected the deployment's name (a string)"),
        ({"deployment": False}, "target.deployment", "got false"),
        ({"api_version": "２０２４-10-21"}, "target.api_version", "expected an API version"),
        ({"api_version": "2024-1٠-21"}, "target.api_version", "expected an API version"),
        ({"api_version": None}, "target.api_version", 'required with "provider": "azure"'),
        ({"api_version": "latest"}, "target.api_version", "expected an API version"),
        ({"api_version": "2024-10-21&x=1"}, "target.api_version", "expected an API version"),
        ({"api_version": 20241021}, "target.api_version", "expected an API version"),
        ({"provider": "openai"}, "target.deployment", 'only with "provider": "azure"'),
        (
            {"provider": "anthropic", "deployment": None, "settings": {"max_tokens": 9}},
            "target.api_version",
            'only with "provider": "azure"',
        ),
        ({"anthropic_version": "2023-06-01"}, "target.anthropic_version", "only with"),
        ({"api_key_env": "SECRET_KEY"}, "target.api_key_env", "not an API key variable"),
    ],
)
def test_a_bad_azure_target_is_refused_naming_the_field(change, field, says):
    config = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(DomainError) as info:
        OpenAIConfig.parse(config)
    assert info.value.field == field
    assert says in info.value.message


def test_a_preview_api_version_and_a_dotted_deployment_are_accepted():
    config = OpenAIConfig.parse(
        {**BASE, "api_version": "2025-01-01-preview", "deployment": "gpt-4o_mini.v2"}
    )
    assert config.protocol.azure == AzureDeployment("gpt-4o_mini.v2", "2025-01-01-preview")
    assert (config.provider, config.anthropic_version) == ("azure", None)


def test_a_prompt_stopped_by_the_content_filter_is_a_client_error_not_a_refused_parameter():
    """Azure's content filter answers 400 with ``"param": "prompt"``: that case errs, and the
    next case is still sent (a refused parameter would stop the client sending)."""
    filtered = answer(
        400,
        {
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure "
                "OpenAI's content management policy.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
            }
        },
    )
    refused = answer(
        400,
        {"error": {"message": "Unrecognized request argument supplied: foo", "param": None}},
    )

    async def go(script):
        client = AzureChatClient(
            endpoint(model="gpt-4o"),
            deployment=AzureDeployment(deployment="d", api_version="2024-10-21"),
            sleep=FakeClock().sleep,
        )
        client.http = FakePoster(script)
        try:
            return [await client.send({"model": "gpt-4o", "messages": []}) for _ in range(2)]
        finally:
            await client.aclose()

    first, second = asyncio.run(go([filtered, answer(200, COMPLETION)]))
    assert first.error_kind == "client_error 400" and "content management" in first.error
    assert second.ok
    first, second = asyncio.run(go([refused, answer(200, COMPLETION)]))
    assert first.error_kind == "rejected_parameter" and "'foo'" in first.error
    assert second.attempts == 0 and second.raw_response["not_sent"] is True
