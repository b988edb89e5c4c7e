"""The OpenAI-compatible target under the shared limiter: a 429's Retry-After holds every
caller of the endpoint, a declared rpm keeps a provider's rpm limit from ever answering 429,
an announced one is learnt from the first 429s (both on OpenAI's endpoint and on Anthropic's
Messages API, whose 429s announce it in ``anthropic-ratelimit-requests-limit``), and a judge
client shares the endpoint."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from core.errors import DomainError
from evals.runner.calls import CallPool
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAIConfig, OpenAITarget
from judges.client import JudgeClient
from judges.models import JudgeVersion
from judges.versions import judge_version_create
from providers.limiter import Limiter, endpoint_key
from providers.limiter.rules import Ask
from tests.fakellm import FakeLLM
from tests.mockllm import mockllm  # noqa: F401 - the fixture


def _config(base_url: str, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": base_url,
        "model": "limits-model",
        "prompt_template": "$input",
        "limit_key": f"test-{uuid.uuid4().hex}",  # this test's own endpoint state
        **extra,
    }


def test_a_429_with_retry_after_holds_every_caller_of_the_endpoint():
    """Two target instances of one endpoint (two workers' chunks): the first is answered
    429 with ``Retry-After: 1``; the second, asked 0.2 s after that answer, is not sent
    before the pause ends."""
    with FakeLLM(retry_after="1") as llm:
        config = _config(llm.base_url, concurrency=4)

        async def go():
            one = OpenAITarget.from_config(config)
            two = OpenAITarget.from_config(config)
            try:
                first = asyncio.ensure_future(one.call(CaseInput(key="a", input="[fault=429x1] a")))
                while not llm.calls["429x1"]:  # the 429 has been answered
                    await asyncio.sleep(0.005)
                answered = time.monotonic()
                await asyncio.sleep(0.2)
                asked = time.monotonic()
                second = await two.call(CaseInput(key="b", input="b"))
                return await first, second, asked - answered
            finally:
                await one.aclose()
                await two.aclose()

        first, second, asked_after = asyncio.run(go())
    assert first.ok and first.attempts == 2
    assert second.ok and second.attempts == 1
    # asked 0.2 s after the 429, answered no sooner than the pause's end, 1 s after it
    assert asked_after + second.latency_ms / 1000 >= 0.95
    assert llm.calls["429x1"] == 2 and llm.calls["ok"] == 1


# What a target adds to speak each provider to the shared mock (no key checked).
PROVIDER_TARGETS = {
    "openai": {},
    "anthropic": {"provider": "anthropic", "api_key_env": None, "settings": {"max_tokens": 16}},
}
by_provider = pytest.mark.parametrize("provider", PROVIDER_TARGETS)


def _calls(config: dict, n: int) -> tuple[list, float]:
    async def go():
        target = OpenAITarget.from_config(config)
        try:
            started = time.monotonic()
            cases = [
                CaseInput(key=f"c{i}", input=f"[case=c{i} p=1 expect=OK{i}]") for i in range(n)
            ]
            results = await asyncio.gather(*(target.call(case) for case in cases))
            return results, time.monotonic() - started
        finally:
            await target.aclose()

    return asyncio.run(go())


@by_provider
def test_a_declared_rpm_keeps_the_provider_from_answering_429(mockllm, provider):  # noqa: F811
    server = mockllm("--rpm", "1200", "--latency-ms", "20", "--jitter-ms", "0")
    config = _config(server.base_url, concurrency=16, rpm=1200, **PROVIDER_TARGETS[provider])
    results, elapsed = _calls(config, 100)
    stats = server.stats()
    assert stats["by_api"][provider]["requests"] == 100
    assert all(r.ok for r in results)
    assert stats["limited"]["rpm"] == 0
    assert stats["requests"] == 100
    # a burst of one second (19.6), then 19.6 a second: the last of 100 after ~4.1 s
    assert elapsed >= 3.8


@by_provider
def test_an_announced_rpm_is_learnt_from_the_first_429s(mockllm, provider):  # noqa: F811
    server = mockllm("--rpm", "1200", "--latency-ms", "20", "--jitter-ms", "0")
    results, _ = _calls(_config(server.base_url, concurrency=16, **PROVIDER_TARGETS[provider]), 160)
    stats = server.stats()
    assert stats["by_api"][provider]["requests"] == stats["requests"]
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    # the first burst overshoots the provider's bucket until its 429 says the limit; then
    # the limiter keeps to it: without learning, 16 calls in flight at 20 ms would draw
    # hundreds of 429s (800 calls/s against 20/s)
    assert 0 < stats["limited"]["rpm"] <= 40


def test_a_429_for_calls_in_flight_is_not_learnt_as_a_requests_per_minute_limit(mockllm):  # noqa: F811
    """The shared mock with ``--max-inflight 4`` only answers the fifth call in flight 429
    with ``x-ratelimit-limit-requests: 4``. Learnt as 4 a minute, it would hold 40 calls for
    ten minutes; the endpoint is slowed down instead (fewer in flight) and never paced."""
    server = mockllm("--max-inflight", "4", "--latency-ms", "50", "--jitter-ms", "0")
    config = _config(server.base_url, concurrency=8, max_attempts=8)

    async def go():
        target = OpenAITarget.from_config(config)
        try:
            cases = [CaseInput(key=f"c{i}", input=f"[case=c{i} p=1]") for i in range(40)]
            results = await asyncio.wait_for(
                asyncio.gather(*(target.call(case) for case in cases)), 20
            )
            store, key = target.limiter.store, target.limiter.key
            seen = await store.exchange(key, "observer", time.time(), Ask(capacity=8), keep=0)
            return results, seen
        finally:
            await target.aclose()

    results, seen = asyncio.run(go())
    stats = server.stats()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert stats["limited"]["inflight"] > 0  # the 429s came, with their header
    assert not seen.paced  # no rpm learnt from them
    assert seen.cap < 8  # slowed down instead


def test_a_judge_client_shares_the_endpoints_slots_with_a_target():
    with FakeLLM() as llm:
        key = f"test-{uuid.uuid4().hex}"
        config = _config(llm.base_url, concurrency=3, limit_key=key)

        async def go():
            target = OpenAITarget.from_config(config)
            judge = JudgeClient(
                base_url=llm.base_url,
                model="judge-model",
                params={"concurrency": 3, "limit_key": key, "structured_output": False},
            )
            try:
                calls = [
                    target.call(CaseInput(key=f"t{i}", input="[latency=200] x")) for i in range(6)
                ]
                calls += [
                    judge.complete(
                        messages=[{"role": "user", "content": "[latency=200] j"}], schema=None
                    )
                    for _ in range(6)
                ]
                return await asyncio.gather(*calls)
            finally:
                await target.aclose()
                await judge.aclose()

        results = asyncio.run(go())
    assert all(r.ok for r in results)
    assert llm.max_in_flight == 3  # 3 in all, not 3 each


def test_a_call_waiting_for_a_slot_is_withdrawn_and_never_sent():
    """Another worker holds the endpoint's only slot: the chunk's call waits for it, and a
    cancel (``CallPool.withdraw``) takes it back unsent, as it does a call not started."""
    with FakeLLM() as llm:
        config = _config(llm.base_url, concurrency=1)
        other = Limiter(
            key=endpoint_key(llm.base_url, "limits-model", config["limit_key"]), capacity=1
        )
        loop = asyncio.new_event_loop()
        held = loop.run_until_complete(other.acquire())
        try:
            with CallPool(config) as pool:
                pool.submit([(101, CaseInput(key="a", input="a"))])
                time.sleep(0.3)
                assert pool.outstanding == 1
                withdrawn = pool.withdraw()
                assert pool.outstanding == 0
                rest = pool.close()
        finally:
            loop.run_until_complete(other.release(held))
            loop.run_until_complete(other.aclose())
            loop.close()
        assert withdrawn == [101]
        assert rest == []
        assert llm.requests == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"rpm": 0}, "target.rpm"),
        ({"rpm": -5}, "target.rpm"),
        ({"tpm": "many"}, "target.tpm"),
        ({"tpm": True}, "target.tpm"),
        ({"rpm": float("inf")}, "target.rpm"),
        ({"limit_key": ""}, "target.limit_key"),
        ({"limit_key": "k" * 201}, "target.limit_key"),
    ],
)
def test_a_bad_limit_is_refused_naming_its_field(change, field):
    with pytest.raises(DomainError) as caught:
        OpenAIConfig.parse({**_config("http://127.0.0.1:1/v1"), **change})
    assert caught.value.field == field


def test_a_judge_versions_limits_are_checked_naming_the_param(db):
    with pytest.raises(DomainError) as caught:
        judge_version_create(
            judge_name="limited",
            kind="rubric",
            model="m",
            base_url="http://127.0.0.1:1/v1",
            prompt_template="",
            params={"rpm": -1},
            output_schema={},
        )
    assert caught.value.field == "params.rpm"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"concurrency": 10**11}, "params.concurrency"),
        ({"concurrency": "8"}, "params.concurrency"),
        ({"timeout_s": float("nan")}, "params.timeout_s"),
        ({"max_attempts": 1_000_000}, "params.max_attempts"),
        ({"backoff_max_s": -1}, "params.backoff_max_s"),
    ],
)
def test_a_judge_versions_client_numbers_are_checked_when_it_is_declared(db, params, field):
    """Not at its first call: there ``concurrency`` 10**11 built one HTTP client per 8 in the
    worker, and a string made every grade an error naming ``target.concurrency``."""
    with pytest.raises(DomainError) as caught:
        judge_version_create(
            judge_name="bounded",
            kind="rubric",
            model="m",
            base_url="http://127.0.0.1:1/v1",
            prompt_template="",
            params=params,
            output_schema={},
        )
    assert caught.value.field == field
    assert not JudgeVersion.objects.exists()
