"""The Messages API client (``providers.anthropic``) on a fake transport: the body and headers
it sends, the answers it reads, its error kinds and retries, and the limiter's reading of
Anthropic's rate-limit headers."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from multidict import CIMultiDict

from core.errors import DomainError
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAIConfig, OpenAITarget
from providers.anthropic.client import MessagesClient
from providers.anthropic.endpoint import DEFAULT_VERSION
from providers.endpoint import EndpointConfig
from providers.limiter.headers import outcome_read, rfc3339_seconds
from providers.transport import HttpAnswer, HttpFailure

pytestmark = pytest.mark.django_db

Answer = HttpAnswer | HttpFailure


def message(text: str = "hello", **extra) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 3,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 7,
        },
        **extra,
    }


def answer(status: int, body: object, **headers: str) -> HttpAnswer:
    text = body if isinstance(body, str) else json.dumps(body)
    return HttpAnswer(status=status, headers=CIMultiDict(headers), text=text)


def error(status: int, kind: str, words: str, **headers: str) -> HttpAnswer:
    return answer(status, {"type": "error", "error": {"type": kind, "message": words}}, **headers)


class FakePoster:
    """Stands for ``JsonPoster``: records each body, answers from ``script`` (the last repeats)."""

    def __init__(self, script: list[Answer] | Callable[[dict], Answer]) -> None:
        self.script = script
        self.bodies: list[dict] = []

    async def post(self, body: dict) -> HttpAnswer:
        self.bodies.append(body)
        if callable(self.script):
            reply = self.script(body)
        else:
            reply = self.script[min(len(self.bodies), len(self.script)) - 1]
        if isinstance(reply, HttpFailure):
            raise reply
        return reply

    async def aclose(self) -> None:
        pass


class FakeClock:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def endpoint(**extra) -> EndpointConfig:
    return EndpointConfig(
        **{
            "base_url": "http://127.0.0.1:9/v1",
            "model": "claude-test-1",
            "api_key_env": "ASSAY_TEST_API_KEY",
            "concurrency": 4,
            "backoff_base_s": 0.5,
            "backoff_max_s": 8.0,
            **extra,
        }
    )


def send(
    script, bodies: list[dict], *, clock: FakeClock | None = None, version=DEFAULT_VERSION, **cfg
):
    """Each body of ``bodies`` sent in turn by one client; returns (replies, poster, client)."""

    async def go():
        client = MessagesClient(
            endpoint(**cfg),
            version=version,
            sleep=(clock or FakeClock()).sleep,
            rng=random.Random(7),
        )
        headers = dict(client.http.headers)
        poster = FakePoster(script)
        client.http = poster
        try:
            return [await client.send(b) for b in bodies], poster, headers
        finally:
            await client.aclose()

    return asyncio.run(go())


BODY = {"model": "claude-test-1", "max_tokens": 64, "messages": [{"role": "user", "content": "q"}]}


def test_the_body_and_headers_carry_the_key_version_and_system_apart(monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", "test-key")
    config = OpenAIConfig.parse(
        {
            "kind": "openai",
            "provider": "anthropic",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "claude-test-1",
            "api_key_env": "ASSAY_TEST_API_KEY",
            "prompt_template": "Q: $input",
            "system_prompt": "Be brief.",
            "settings": {"temperature": 0.2, "max_tokens": 64, "top_k": 5},
        }
    )

    async def go():
        target = OpenAITarget(config)
        try:
            body = target.request_body(CaseInput(key="c1", input="2+2?"))
            return body, dict(target.client.http.headers), str(target.client.http.url)
        finally:
            await target.aclose()

    body, headers, url = asyncio.run(go())
    assert body == {
        "model": "claude-test-1",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Q: 2+2?"}],
        "temperature": 0.2,
        "top_k": 5,
    }
    assert list(body) == ["model", "max_tokens", "system", "messages", "temperature", "top_k"]
    assert url == "http://127.0.0.1:9/v1/messages"
    assert headers["x-api-key"] == "test-key"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in headers


def test_a_keyless_endpoint_sends_no_key_and_the_version_is_settable(monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", "test-key")
    (reply,), poster, headers = send(
        [answer(200, message())], [BODY], api_key_env=None, version="2099-01-01"
    )
    assert reply.ok
    assert "x-api-key" not in headers and "Authorization" not in headers
    assert headers["anthropic-version"] == "2099-01-01"
    assert poster.bodies == [BODY]


def test_the_reply_is_its_text_blocks_joined_with_usage_and_the_raw_body_kept():
    body = message(
        content=[
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "The answer "},
            {"type": "text", "text": "is 4."},
        ],
        stop_reason="max_tokens",
    )
    (reply,), _, _ = send([answer(200, body)], [BODY])
    assert reply.ok and reply.error_kind is None
    assert reply.output == "The answer is 4."
    assert (reply.input_tokens, reply.output_tokens) == (12, 3)
    assert reply.model == "claude-test-1"
    assert reply.raw_response["stop_reason"] == "max_tokens"
    assert reply.raw_response["usage"]["cache_read_input_tokens"] == 7
    assert reply.raw_response["usage"]["cache_creation_input_tokens"] == 5
    assert reply.attempts == 1


def test_a_529_overloaded_is_retried_like_a_503_then_answered():
    clock = FakeClock()
    script = [error(529, "overloaded_error", "Overloaded"), answer(200, message("ok"))]
    (reply,), poster, _ = send(script, [BODY], clock=clock)
    assert reply.ok and reply.output == "ok"
    assert reply.attempts == 2 and len(poster.bodies) == 2
    assert len(clock.waits) == 1


def test_529s_to_the_last_attempt_are_server_error_529_with_the_providers_words():
    (reply,), poster, _ = send(
        [error(529, "overloaded_error", "Overloaded")], [BODY], max_attempts=3
    )
    assert reply.error_kind == "server_error 529"
    assert reply.error == "server_error 529 after 3 attempts: Overloaded"
    assert reply.raw_response == {
        "status": 529,
        "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    }
    assert len(poster.bodies) == 3


def test_a_429_waits_at_least_its_retry_after():
    clock = FakeClock()
    limited = error(429, "rate_limit_error", "Number of requests exceeded", **{"retry-after": "7"})
    (reply,), _, _ = send([limited, answer(200, message())], [BODY], clock=clock)
    assert reply.ok and reply.attempts == 2
    assert clock.waits and clock.waits[0] >= 7

    (reply,), _, _ = send([limited], [BODY], clock=FakeClock(), max_attempts=2)
    assert reply.error_kind == "rate_limited"
    assert reply.error == "rate_limited after 2 attempts: Number of requests exceeded"


def test_timeouts_and_connection_errors_are_retried_kinds():
    timeout = HttpFailure(timeout=True, name="TimeoutError", detail="")
    refused = HttpFailure(timeout=False, name="ClientConnectorError", detail="refused")
    (reply,), _, _ = send([timeout, answer(200, message())], [BODY])
    assert reply.ok and reply.attempts == 2
    (reply,), _, _ = send([timeout], [BODY], max_attempts=2)
    assert reply.error_kind == "timeout"
    (reply,), _, _ = send([refused], [BODY], max_attempts=2)
    assert reply.error_kind == "connection_error"
    assert "refused" in reply.error


def test_an_extra_input_is_a_rejected_parameter_named_and_the_rest_is_not_sent():
    refusal = error(400, "invalid_request_error", "seed: Extra inputs are not permitted")
    replies, poster, _ = send([refusal], [BODY, BODY, BODY])
    assert len(poster.bodies) == 1
    assert [r.error_kind for r in replies] == ["rejected_parameter"] * 3
    assert replies[0].error == (
        "rejected_parameter: model 'claude-test-1' refuses parameter 'seed': "
        "seed: Extra inputs are not permitted"
    )
    assert replies[0].raw_response["rejected_parameter"] == "seed"
    assert [r.attempts for r in replies] == [1, 0, 0]
    assert [bool(r.raw_response.get("not_sent")) for r in replies] == [False, True, True]


def test_other_400s_are_client_errors_in_the_providers_words_and_not_retried():
    role = error(400, "invalid_request_error", 'messages.0.role: Unexpected role "system"')
    (reply,), poster, _ = send([role], [BODY])
    assert reply.error_kind == "client_error 400"
    assert reply.error == 'client_error 400: messages.0.role: Unexpected role "system"'
    assert len(poster.bodies) == 1
    (reply,), _, _ = send([error(401, "authentication_error", "invalid x-api-key")], [BODY])
    assert reply.error == "client_error 401: invalid x-api-key"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "the 200 body is not a JSON object"),
        ({"type": "message"}, "the reply has no content"),
        (message(content=[]), "the reply has no text (stop_reason 'end_turn')"),
        (
            message(content=[{"type": "text", "text": ""}], stop_reason="max_tokens"),
            "the reply has no text (stop_reason 'max_tokens')",
        ),
        (
            message(content=[{"type": "tool_use", "id": "t", "name": "f", "input": {}}]),
            "the reply has no text (stop_reason 'end_turn')",
        ),
    ],
)
def test_a_malformed_or_empty_200_is_malformed_response(body, says):
    (reply,), poster, _ = send([answer(200, body)], [BODY])
    assert reply.error_kind == "malformed_response"
    assert reply.error == f"malformed_response: {says}"
    assert reply.output == ""
    assert len(poster.bodies) == 1


def test_the_limiter_reads_anthropics_rate_limit_headers():
    now = datetime(2026, 12, 7, 10, 0, 0, tzinfo=UTC)
    later = (now + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    headers = {
        "retry-after": "12",
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": later,
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "39000",
        "anthropic-ratelimit-tokens-reset": later,
    }
    outcome = outcome_read(CIMultiDict(headers), limited=True, retry_after_s=12.0)
    assert outcome.limited and outcome.retry_after_s == 12.0
    assert (outcome.rpm_limit, outcome.remaining_requests) == (50.0, 0.0)
    assert (outcome.tpm_limit, outcome.remaining_tokens) == (40000.0, 39000.0)
    assert outcome.reset_requests_s is not None and outcome.reset_tokens_s is not None
    assert rfc3339_seconds(later, now=now.timestamp()) == 30.0
    assert rfc3339_seconds("2026-12-07T10:00:30+00:00", now=now.timestamp()) == 30.0
    assert rfc3339_seconds("2026-12-07T09:00:00Z", now=now.timestamp()) == 0.0
    assert rfc3339_seconds("soon") is None and rfc3339_seconds("2026-12-07T10:00:30") is None
    # OpenAI's headers win when both are sent
    both = {**headers, "x-ratelimit-limit-requests": "60"}
    assert outcome_read(both, limited=False, retry_after_s=None).rpm_limit == 60.0


def test_the_limiter_learns_from_a_429s_headers_through_the_client():
    limited = error(
        429,
        "rate_limit_error",
        "slow down",
        **{"retry-after": "1", "anthropic-ratelimit-requests-limit": "30"},
    )
    outcomes = []

    async def go():
        client = MessagesClient(endpoint(), sleep=FakeClock().sleep, rng=random.Random(1))
        client.http = FakePoster([limited, answer(200, message())])
        release = client.limiter.release

        async def recording(slot, outcome):
            outcomes.append(outcome)
            await release(slot, outcome)

        client.limiter.release = recording
        try:
            return await client.send(BODY)
        finally:
            await client.aclose()

    reply = asyncio.run(go())
    assert reply.ok
    assert outcomes[0].limited and outcomes[0].rpm_limit == 30.0
    assert outcomes[0].retry_after_s == 1.0
    assert outcomes[1].tokens_delta != 0  # corrected by usage (12 + 3 tokens)


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        (
            {"provider": "gemini"},
            "target.provider",
            'unknown provider "gemini" (known: openai, anthropic, azure)',
        ),
        ({"settings": {}}, "target.settings.max_tokens", "required by Anthropic's Messages API"),
        ({"settings": {"max_tokens": 0}}, "target.settings.max_tokens", "at least 1"),
        ({"settings": {"max_tokens": 1.5}}, "target.settings.max_tokens", "at least 1"),
        (
            {"settings": {"max_tokens": 9, "system": "x"}},
            "target.settings.system",
            "set by Assay",
        ),
        (
            {"tools": ["tests.evals.agent_tools:lookup_order"], "max_steps": 0},
            "target.max_steps",
            "expected an integer from 1 to 500",
        ),
        ({"anthropic_version": "2023-06-01\r\nX: y"}, "target.anthropic_version", "expected"),
        ({"anthropic_version": 2023}, "target.anthropic_version", "expected"),
        (
            {"provider": "openai", "anthropic_version": "2023-06-01"},
            "target.anthropic_version",
            "only with",
        ),
    ],
)
def test_a_bad_anthropic_target_is_refused_naming_the_field(change, field, says):
    config = {
        "kind": "openai",
        "provider": "anthropic",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "claude-test-1",
        "prompt_template": "$input",
        "settings": {"max_tokens": 64},
        **change,
    }
    with pytest.raises(DomainError) as info:
        OpenAIConfig.parse(config)
    assert info.value.field == field
    assert says in info.value.message


def test_an_anthropic_target_reads_anthropic_api_key_unless_told():
    base = {
        "kind": "openai",
        "provider": "anthropic",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "claude-test-1",
        "prompt_template": "$input",
        "settings": {"max_tokens": 64},
    }
    assert OpenAIConfig.parse(base).api_key_env == "ANTHROPIC_API_KEY"
    assert OpenAIConfig.parse({**base, "api_key_env": None}).api_key_env is None
    assert OpenAIConfig.parse({**base, "api_key_env": "MY_API_KEY"}).api_key_env == "MY_API_KEY"
    with pytest.raises(DomainError, match=r"^target\.api_key_env: looks like a key"):
        OpenAIConfig.parse({**base, "api_key_env": "sk-ant-api03-abcdefghijklmnop"})
    openai = {k: v for k, v in base.items() if k != "provider"}
    parsed = OpenAIConfig.parse(openai)
    assert (parsed.provider, parsed.api_key_env, parsed.anthropic_version) == (
        "openai",
        "OPENAI_API_KEY",
        None,
    )


def test_tool_use_blocks_alone_answer_a_call_declaring_tools_and_nothing_else():
    uses = message(
        content=[{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
        stop_reason="tool_use",
    )
    with_tools = {**BODY, "tools": [{"name": "f", "description": "", "input_schema": {}}]}
    (answered, refused), _, _ = send([answer(200, uses)], [with_tools, BODY])
    assert answered.ok and answered.output == ""
    assert answered.raw_response["content"][0]["id"] == "toolu_1"
    assert answered.input_tokens == 12
    assert refused.error_kind == "malformed_response"
    assert "no text (stop_reason 'tool_use')" in refused.error


def test_the_token_estimate_counts_a_tool_loops_content_blocks():
    client = MessagesClient(endpoint())
    plain = {**BODY, "system": "s" * 40}
    turns = {
        **plain,
        "messages": [
            *plain["messages"],
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "t" * 80},
                    {"type": "tool_use", "id": "a", "name": "f", "input": {"k": "v" * 30}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "r" * 400},
                    {
                        "type": "tool_result",
                        "tool_use_id": "b",
                        "content": [{"type": "text", "text": "x" * 40}],
                    },
                ],
            },
        ],
    }
    # "q" and 64 max tokens, the system's 40 characters; then 80 + 39 (the input as JSON)
    # + 400 + 40 characters of blocks
    assert client.tokens_estimate(plain) == pytest.approx(64 + 41 / 4)
    assert client.tokens_estimate(turns) == pytest.approx(64 + (41 + 80 + 39 + 400 + 40) / 4)
    asyncio.run(client.aclose())
