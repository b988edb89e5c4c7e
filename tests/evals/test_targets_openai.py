"""The OpenAI-compatible target against a real local HTTP server (tests/fakellm.py)."""

from __future__ import annotations

import asyncio
import random
import threading
from datetime import UTC, datetime

import pytest

from core.errors import DomainError
from evals.runner.targets import CaseInput, target_from_config
from evals.runner.targets.openai import OpenAITarget, prompt_render
from judges.versions import judge_version_create
from providers.answers import retry_after_seconds
from tests.fakellm import TEMPERATURE_MESSAGE, FakeLLM, body_text


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server


class FakeClock:
    """Records requested waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def _config(llm: FakeLLM, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": llm.base_url,
        "model": "example-model-1.5",
        "prompt_template": "$input",
        "backoff_base_s": 0.5,
        "backoff_max_s": 8,
        **extra,
    }


def _call(config: dict, cases: list[CaseInput], clock: FakeClock | None = None):
    async def go():
        target = OpenAITarget.from_config(
            config, sleep=clock.sleep if clock else None, rng=random.Random(7)
        )
        try:
            return await asyncio.gather(*(target.call(case) for case in cases))
        finally:
            await target.aclose()

    return asyncio.run(go())


def _one(config: dict, text: str, clock: FakeClock | None = None):
    return _call(config, [CaseInput(key="c1", input=text)], clock)[0]


def test_it_returns_the_completion_with_usage_and_model(fake_llm, monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", "sk-test")
    config = _config(
        fake_llm,
        system_prompt="Be brief.",
        api_key_env="ASSAY_TEST_API_KEY",
        settings={"temperature": 0.2, "seed": 3},
    )

    result = _one(config, "What is 2+2? [answer=4]")

    assert result.ok
    assert result.output == "4"
    assert result.model == "example-model-1.5"
    assert result.input_tokens > 0
    assert result.output_tokens == 1
    assert result.attempts == 1
    assert result.latency_ms > 0
    assert result.raw_response["choices"][0]["message"]["content"] == "4"
    sent = fake_llm.bodies[0]
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["temperature"] == 0.2
    assert sent["seed"] == 3


def test_it_retries_a_429_after_waiting_at_least_retry_after_then_succeeds(fake_llm):
    fake_llm.retry_after = "2"
    clock = FakeClock()

    result = _one(_config(fake_llm), "hi [fault=429x1]", clock)

    assert result.ok
    assert result.output == "fake answer"
    assert result.attempts == 2
    assert fake_llm.calls["429x1"] == 2
    assert len(clock.waits) == 1
    assert clock.waits[0] >= 2


def test_it_errors_as_rate_limited_after_max_attempts_of_429(fake_llm):
    fake_llm.retry_after = "2"
    clock = FakeClock()

    result = _one(_config(fake_llm, max_attempts=4), "hi [fault=429]", clock)

    assert not result.ok
    assert result.output == ""
    assert result.error_kind == "rate_limited"
    assert result.error.startswith("rate_limited")
    assert "Rate limit reached for requests" in result.error
    assert result.attempts == 4
    assert fake_llm.calls["429"] == 4
    assert len(clock.waits) == 3
    assert all(wait >= 2 for wait in clock.waits)
    assert result.raw_response["status"] == 429


def test_it_honours_a_retry_after_given_as_an_http_date(fake_llm):
    fake_llm.retry_after = "30"
    clock = FakeClock()

    result = _one(_config(fake_llm, max_attempts=2), "hi [fault=429-date]", clock)

    assert result.error_kind == "rate_limited"
    assert 25 <= clock.waits[0] <= 31


def test_it_waits_longer_after_each_failure_up_to_the_cap(fake_llm):
    clock = FakeClock()

    _one(_config(fake_llm, max_attempts=6, backoff_base_s=1, backoff_max_s=4), "[fault=500]", clock)

    # equal jitter: wait_k in [cap_k / 2, cap_k], cap_k = min(4, 1 * 2^(k-1))
    caps = [1, 2, 4, 4, 4]
    assert len(clock.waits) == 5
    assert all(cap / 2 <= wait <= cap for wait, cap in zip(clock.waits, caps, strict=True))


@pytest.mark.parametrize("status", ["500", "502", "503"])
def test_it_retries_a_server_error_then_succeeds(fake_llm, status):
    clock = FakeClock()

    result = _one(_config(fake_llm), f"hi [fault={status}x2]", clock)

    assert result.ok
    assert result.attempts == 3
    assert fake_llm.calls[f"{status}x2"] == 3


@pytest.mark.parametrize("status", ["500", "502", "503"])
def test_it_errors_with_the_status_after_a_server_error_every_time(fake_llm, status):
    clock = FakeClock()

    result = _one(_config(fake_llm, max_attempts=3), f"hi [fault={status}]", clock)

    assert result.error_kind == f"server_error {status}"
    assert result.error.startswith(f"server_error {status} after 3 attempts")
    assert f"The server had an error ({status})" in result.error
    assert fake_llm.calls[status] == 3
    assert result.attempts == 3


def test_it_errors_as_timeout_when_the_server_hangs():
    with FakeLLM(hang_s=5) as llm:
        clock = FakeClock()

        result = _one(_config(llm, timeout_s=0.3, max_attempts=2), "hi [fault=timeout]", clock)

        assert result.error_kind == "timeout"
        assert result.error.startswith("timeout after 2 attempts")
        assert llm.calls["timeout"] == 2
        assert result.attempts == 2


def test_it_errors_as_connection_error_when_nothing_listens():
    with FakeLLM() as llm:
        base_url = llm.base_url
    clock = FakeClock()
    config = {"kind": "openai", "base_url": base_url, "model": "m", "prompt_template": "$input"}

    result = _one({**config, "max_attempts": 2}, "hi", clock)

    assert result.error_kind == "connection_error"
    assert result.attempts == 2


def test_it_does_not_retry_a_rejected_parameter_and_keeps_the_message_verbatim(fake_llm):
    clock = FakeClock()
    config = _config(fake_llm, settings={"temperature": 0})

    result = _one(config, "hi [fault=400-temperature]", clock)

    assert result.error == (
        f"rejected_parameter: model 'example-model-1.5' refuses parameter 'temperature': "
        f"{TEMPERATURE_MESSAGE}"
    )
    assert result.error_kind == "rejected_parameter"
    assert result.attempts == 1
    assert fake_llm.calls["400-temperature"] == 1
    assert clock.waits == []
    assert result.raw_response["body"]["error"]["param"] == "temperature"


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("malformed", "not a JSON object"),
        ("no-choices", "no choices"),
        ("empty", "empty content"),
    ],
)
def test_it_errors_on_a_200_without_a_usable_answer(fake_llm, fault, words):
    result = _one(_config(fake_llm), f"hi [fault={fault}]", FakeClock())

    assert not result.ok
    assert result.output == ""
    assert result.error_kind == "malformed_response"
    assert words in result.error
    assert fake_llm.calls[fault] == 1


def test_it_holds_64_calls_in_flight_over_one_pool_of_64_connections(fake_llm):
    config = _config(fake_llm, concurrency=64)
    cases = [CaseInput(key=f"c{i}", input=f"case {i} [latency=300]") for i in range(128)]

    async def go():
        target = OpenAITarget.from_config(config)
        try:
            return target.http.max_connections, await asyncio.gather(
                *(target.call(case) for case in cases)
            )
        finally:
            await target.aclose()

    pool, results = asyncio.run(go())

    assert pool == 64
    assert all(result.ok for result in results)
    assert fake_llm.max_in_flight > 16
    assert fake_llm.max_in_flight <= 64


def test_it_never_exceeds_the_configured_concurrency(fake_llm):
    config = _config(fake_llm, concurrency=5)
    cases = [CaseInput(key=f"c{i}", input=f"case {i} [latency=100]") for i in range(20)]

    results = _call(config, cases)

    assert all(result.ok for result in results)
    assert fake_llm.max_in_flight == 5


def test_it_sends_the_key_as_a_bearer_token_and_the_body_as_json(fake_llm, monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_API_KEY", "sk-test")

    assert _one(_config(fake_llm, api_key_env="ASSAY_TEST_API_KEY"), "hi").ok

    sent = fake_llm.headers[0]
    assert sent["authorization"] == "Bearer sk-test"
    assert sent["content-type"] == "application/json"


def test_it_sends_no_authorization_header_when_the_key_variable_is_unset(fake_llm, monkeypatch):
    monkeypatch.delenv("ASSAY_NO_SUCH_API_KEY", raising=False)

    assert _one(_config(fake_llm, api_key_env="ASSAY_NO_SUCH_API_KEY"), "hi").ok

    assert "authorization" not in fake_llm.headers[0]


@pytest.mark.parametrize("keyless", [None, False])
def test_a_keyless_target_sends_no_key_even_when_openai_api_key_is_set(
    fake_llm, monkeypatch, keyless
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    assert _one(_config(fake_llm, api_key_env=keyless), "hi").ok

    assert "authorization" not in fake_llm.headers[0]


def test_it_inserts_case_text_as_data_never_as_template_source():
    case = CaseInput(
        key="k1",
        input="Use {foo}, {input}, $input, $expected and ${key} literally",
        expected={"a": 1},
        context=[{"id": "d1", "text": "doc one"}],
        tags=["x", "y"],
        attempt=3,
    )

    text = prompt_render("Q: $input\nE: $expected\nC: $context\nT: $tags #$attempt $$5", case)

    assert text == (
        'Q: Use {foo}, {input}, $input, $expected and ${key} literally\nE: {"a":1}\n'
        "C: [d1] doc one\nT: x, y #3 $5"
    )


def test_it_sends_the_case_input_in_a_template_full_of_json_braces(fake_llm):
    template = 'Reply as {"answer": "...", "sources": [{"id": 1}]} to: ${input}.'
    config = _config(fake_llm, prompt_template=template)
    target = OpenAITarget.from_config(config)
    try:
        body = target.request_body(CaseInput(key="c1", input="What is 2+2?"))
    finally:
        asyncio.run(target.aclose())
    assert body["messages"][-1]["content"] == (
        'Reply as {"answer": "...", "sources": [{"id": 1}]} to: What is 2+2?.'
    )


PLACEHOLDERS = "$input, $expected, $key, $context, $tags, $attempt"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            "Answer the claim: {input}",
            f"uses {{input}}; write $input (placeholders: {PLACEHOLDERS})",
        ),
        (
            "Claim: {{ input }}",
            f"uses {{{{ input }}}}; write $input (placeholders: {PLACEHOLDERS})",
        ),
        (
            "Answer the question.",
            "uses no case placeholder, so every case would be sent the same prompt: use $input "
            "(case placeholders: $input, $expected, $context, $key)",
        ),
        (
            "Attempt $attempt of a case tagged $tags",
            "uses no case placeholder, so every case would be sent the same prompt: use $input "
            "(case placeholders: $input, $expected, $context, $key)",
        ),
        (
            "$input costs $5",
            "'$5' at line 1, column 14 is not a placeholder: write $name or ${name} for a "
            f"placeholder and $$ for a literal $ (placeholders: {PLACEHOLDERS})",
        ),
        (
            "$input from $user",
            f"unknown placeholder $user (placeholders: {PLACEHOLDERS}; $$ for a literal $)",
        ),
    ],
)
def test_it_refuses_a_bad_prompt_template_naming_the_field_and_the_syntax(template, message):
    config = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    with pytest.raises(DomainError) as info:
        target_from_config({**config, "prompt_template": template})
    assert (info.value.field, info.value.message) == ("target.prompt_template", message)
    assert str(info.value) == f"target.prompt_template: {message}"


@pytest.mark.parametrize(
    "template", ["$input", "${input}!", "Expect $expected", "Docs: $context", "Case $key"]
)
def test_any_case_placeholder_is_enough(template):
    config = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    asyncio.run(target_from_config({**config, "prompt_template": template}).aclose())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"base_url": None}, "target.base_url"),
        ({"base_url": "ftp://x"}, "target.base_url"),
        ({"model": ""}, "target.model"),
        ({"prompt_template": "$nope"}, "target.prompt_template"),
        ({"prompt_template": "cost $"}, "target.prompt_template"),
        ({"settings": []}, "target.settings"),
        ({"settings": {"messages": []}}, "target.settings.messages"),
        ({"concurrency": 0}, "target.concurrency"),
        ({"concurrency": 2.5}, "target.concurrency"),
        ({"timeout_s": "60"}, "target.timeout_s"),
        ({"max_attempts": True}, "target.max_attempts"),
        ({"system_prompt": 3}, "target.system_prompt"),
        ({"tempreature": 0}, "target.tempreature"),
        # Bounded above (and NaN/inf, which a TOML config can spell, refused): concurrency
        # 10**11 used to build 1.25e10 HTTP clients while the web process checked the config.
        ({"concurrency": 10**11}, "target.concurrency"),
        ({"concurrency": 1025}, "target.concurrency"),
        ({"max_attempts": 1_000_000}, "target.max_attempts"),
        ({"timeout_s": float("nan")}, "target.timeout_s"),
        ({"timeout_s": float("inf")}, "target.timeout_s"),
        ({"timeout_s": 1e300}, "target.timeout_s"),
        ({"backoff_max_s": 1e9}, "target.backoff_max_s"),
        ({"retry_after_max_s": float("nan")}, "target.retry_after_max_s"),
    ],
)
def test_it_refuses_a_bad_config_naming_the_field(change, field):
    config = {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": "$input",
        **change,
    }
    with pytest.raises(DomainError, match=field.replace(".", r"\.")):
        target_from_config(config)


@pytest.mark.parametrize(
    "name", ["SECRET_KEY", "DATABASE_URL", "HOME", "openai_api_key", "OPENAI_API_KEY_X", "", 3]
)
def test_it_never_sends_a_variable_that_is_not_an_api_key(name):
    """Whoever configures a target picks the URL the key goes to: only *_API_KEY names."""
    config = {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": "$input",
        "api_key_env": name,
    }
    with pytest.raises(DomainError, match=r"^target\.api_key_env: "):
        target_from_config(config)
    config["api_key_env"] = "ANTHROPIC_API_KEY"
    target_from_config(config)


@pytest.mark.django_db
def test_a_judge_version_refuses_a_variable_that_is_not_an_api_key():

    with pytest.raises(DomainError, match=r"params\.api_key_env: 'SECRET_KEY' is not"):
        judge_version_create(
            judge_name="j",
            kind="rubric",
            model="m",
            base_url="http://127.0.0.1:9/v1",
            prompt_template="",
            params={"api_key_env": "SECRET_KEY"},
            output_schema={},
        )


def test_it_reads_retry_after_as_seconds_or_an_http_date():

    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("Mon, 30 Nov 2026 12:00:07 GMT", now=now) == 7.0
    assert retry_after_seconds("Mon, 30 Nov 2026 11:00:00 GMT", now=now) == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_the_fake_server_stops_without_leaking_threads():
    before = threading.active_count()
    with FakeLLM() as llm:
        _one(_config(llm), "hi")
        assert llm.calls["ok"] == 1
    assert threading.active_count() == before
    assert body_text(llm.bodies[0]) == "hi"
