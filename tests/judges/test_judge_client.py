"""Every judge failure path against a real local HTTP server ends as an errored grade whose
reason is shown, the raw reply or provider message kept; never a pass or a counted fail."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from judges import client as judge_client
from tests.fakellm import TEMPERATURE_MESSAGE, FakeLLM
from tests.judge_builders import (
    fenced,
    judge_grade_one,
    make_trials,
    make_version,
    user_text,
    verdict_json,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def waits(monkeypatch):
    """A fake clock: records every backoff wait instead of sleeping."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)
    return recorded


def _grade(llm, output, **params):
    trial = make_trials([output])[0]
    return judge_grade_one(trial=trial, judge_version=make_version(llm, **params))


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("[fault=429]", "rate_limited"),
        ("[fault=500]", "server_error"),
        ("[fault=502]", "server_error"),
        ("[fault=503]", "server_error"),
        ("[fault=400-temperature]", "rejected_parameter"),
        ("[fault=refusal]", "refusal"),
        ("[fault=empty]", "empty"),
        ("[fault=no-choices]", "empty"),
        ("[fault=malformed]", "http_error"),
        ("[answer=I think this is mostly fine.]", "unparseable"),
        ('[answer={"reasoning": "r", "verdict": "CI"}]', "invalid_verdict"),
        # a key twice: the last one does not win (json.loads would read PASS)
        ('[answer={"reasoning": "r", "verdict": "FAIL", "verdict": "PASS"}]', "unparseable"),
    ],
)
def test_it_gives_an_errored_grade_with_the_reason_for_each_failure(
    fake_llm, waits, output, reason
):
    grade = _grade(fake_llm, output)
    assert (grade.status, grade.passed, grade.score, grade.reason) == ("error", None, None, reason)
    assert grade.details["error"] == reason
    assert grade.gating is False  # an untrusted version is provisional
    assert grade.details["prompt"].count(output) == 1


def test_it_keeps_the_provider_message_of_a_rejected_parameter(fake_llm, waits):
    grade = _grade(fake_llm, "[fault=400-temperature]", temperature=0)
    assert TEMPERATURE_MESSAGE in grade.details["provider_message"]
    assert fake_llm.bodies[0]["temperature"] == 0
    assert fake_llm.requests == 1  # a 4xx is not retried


def test_it_keeps_an_unparseable_reply_verbatim(fake_llm, waits):
    grade = _grade(fake_llm, "[answer=I think this is mostly fine.]")
    assert grade.details["raw_reply"] == "I think this is mostly fine."


def test_it_retries_a_429_up_to_the_maximum_honouring_retry_after(waits):
    with FakeLLM(retry_after="2") as llm:
        grade = _grade(llm, "[fault=429]", max_attempts=4)
        assert llm.calls["429"] == 4
    assert grade.details["attempts"] == 4
    assert len(waits) == 3
    assert min(waits) >= 2


def test_it_calls_a_timeout_a_timeout(waits):
    with FakeLLM(hang_s=5) as llm:
        grade = _grade(llm, "[fault=timeout]", timeout_s=0.2, max_attempts=2)
        assert llm.calls["timeout"] == 2
    assert grade.reason == "timeout"


def test_it_calls_a_wrong_endpoint_an_http_error(fake_llm, waits):
    trial = make_trials(["fine"])[0]
    version = make_version(fake_llm)
    version.base_url = fake_llm.base_url + "/missing"
    version.save()
    grade = judge_grade_one(trial=trial, judge_version=version)
    assert grade.reason == "http_error"


def test_it_errors_a_reply_that_repeats_the_fence_nonce(waits):
    def echo(body):
        nonce = user_text(body).split("<<<DATA-")[1][:32]
        return json.dumps({"reasoning": f"saw {nonce}", "verdict": "PASS"})

    with FakeLLM(responder=echo) as llm:
        grade = _grade(llm, "fine")
    assert (grade.status, grade.reason) == ("error", "nonce_leak")


def test_it_errors_a_reply_citing_a_document_id_that_was_not_offered(waits):
    reply = json.dumps(
        {
            "reasoning": "r",
            "documents": [
                {"doc_id": "doc-1", "relevant": True},
                {"doc_id": "kb-7", "relevant": True},
            ],
        }
    )
    with FakeLLM(responder=lambda body: reply) as llm:
        trial = make_trials(
            ["x"], context=[{"id": "kb-7", "text": "a"}, {"id": "kb-8", "text": "b"}]
        )[0]
        grade = judge_grade_one(
            trial=trial, judge_version=make_version(llm, kind="context_relevance")
        )
    assert (grade.status, grade.reason) == ("error", "unknown_id")


def test_it_sends_the_output_schema_as_a_json_schema_response_format(waits):
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        grade = _grade(llm, "Paris")
        body = llm.bodies[0]
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert list(schema["properties"]) == ["reasoning", "verdict"]  # reasoning first
    assert schema["properties"]["verdict"]["enum"] == ["PASS", "FAIL"]
    assert (grade.status, grade.passed) == ("ok", True)


def test_it_reads_a_plain_json_reply_when_structured_output_is_off(waits):
    with FakeLLM(responder=lambda body: verdict_json("FAIL")) as llm:
        grade = _grade(llm, "Berlin", structured_output=False)
        assert "response_format" not in llm.bodies[0]
    assert (grade.status, grade.passed) == ("ok", False)


def test_it_records_tokens_latency_and_a_null_cost_for_an_unpriced_judge_model(waits):
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        grade = _grade(llm, "Paris")
    d = grade.details
    assert d["input_tokens"] > 0 and d["output_tokens"] > 0
    assert d["latency_ms"] > 0
    assert d["cost_usd"] is None and d["price_source"] is None


def test_it_prices_a_known_judge_model_apart_from_the_trial_cost(waits):

    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        trial = make_trials(["Paris"])[0]
        grade = judge_grade_one(trial=trial, judge_version=make_version(llm, model="gpt-4o"))
    d = grade.details
    expected = (
        Decimal(d["input_tokens"]) * Decimal("2.50")
        + Decimal(d["output_tokens"]) * Decimal("10.00")
    ) / Decimal(1_000_000)
    assert Decimal(d["cost_usd"]) == expected
    trial.refresh_from_db()
    assert trial.cost_usd is None


def test_a_fenced_block_helper_sees_the_output(waits):
    seen = []

    def spy(body):
        seen.append(fenced(body))
        return verdict_json("PASS")

    with FakeLLM(responder=spy) as llm:
        _grade(llm, "Paris")
    assert seen[0][-1] == "Paris"
