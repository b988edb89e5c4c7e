"""Issue 13, item 10: a provider's refusals read as kinds, once.

- a rejected parameter is recognised from 400 and 422 answers, from ``error.param``, a
  pydantic ``detail`` or the message alone; a job whose calls are all refused stops calling
  after the first round and says once which model refuses which parameter;
- an upstream error body is stored as an excerpt of at most 2 KB;
- a grader's pattern runs under a time limit: a catastrophic one is an errored grade.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from evals.grading import graders
from evals.grading.grader_config import parse_grader_specs
from evals.grading.graders import run_grader
from evals.models import Case, Run, Suite, Trial
from evals.runner.start import run_start
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAITarget
from judges import runs
from judges.models import JudgeRun
from providers.answers import MAX_ERROR_BODY_BYTES, rejected_parameter_name
from tests.fakellm import TEMPERATURE_MESSAGE, FakeLLM
from tests.judge_builders import make_trials, make_version

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("status", "body", "message", "param"),
    [
        (400, {"error": {"message": "x", "param": "temperature"}}, "x", "temperature"),
        (422, {"error": {"message": "x", "param": "top_k"}}, "x", "top_k"),
        (400, {"error": {"message": TEMPERATURE_MESSAGE}}, TEMPERATURE_MESSAGE, "temperature"),
        (
            422,
            {},
            "Unsupported value: 'reasoning_effort' does not support 'max'",
            "reasoning_effort",
        ),
        (400, {}, "'logprobs' is not supported with this model", "logprobs"),
        (400, {}, "Unrecognized request argument supplied: functions", "functions"),
        (
            422,
            {"detail": [{"loc": ["body", "seed"], "msg": "Extra inputs are not permitted"}]},
            "Extra inputs are not permitted",
            "seed",
        ),
        (400, {}, "Unsupported parameter for this model.", ""),  # refused, not named
        (400, {"error": {"message": "prompt too long"}}, "prompt too long", None),
        # about one case's content, not a refused setting
        (400, {"error": {"param": "messages[0].content"}}, "x", None),
        (400, {}, "Invalid value for 'messages[1].role': 'bot'", None),
        (400, {}, "Invalid value for 'temperature': 5 is above 2", None),
        (
            422,
            {"detail": [{"loc": ["body", "messages"], "msg": "Field required"}]},
            "Field required",
            None,
        ),
        (404, {"error": {"message": "x", "param": "model"}}, "x", None),  # not a 400/422
        (401, {}, "Unsupported parameter: 'temperature'", None),
    ],
)
def test_a_rejected_parameter_is_read_from_400_and_422_and_the_message(
    status, body, message, param
):
    assert rejected_parameter_name(status, body, message) == param


def _call_all(config: dict, n: int):
    async def go():
        target = OpenAITarget.from_config(config)
        try:
            results = []
            for i in range(n):  # one after another: the second call sees the first refusal
                results.append(await target.call(CaseInput(key=f"c{i}", input=f"q{i}")))
            return results
        finally:
            await target.aclose()

    return asyncio.run(go())


def _config(llm: FakeLLM, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": llm.base_url,
        "model": "m-1",
        "prompt_template": "$input",
        "max_attempts": 1,
        **extra,
    }


def test_a_422_without_error_param_is_a_rejected_parameter_and_the_rest_is_not_sent():
    body = json.dumps(
        {"detail": [{"loc": ["body", "top_k"], "msg": "Extra inputs are not permitted"}]}
    ).encode()
    with FakeLLM(responder=lambda b: (422, body)) as llm:
        results = _call_all(_config(llm, settings={"top_k": 3}), 4)
        assert llm.requests == 1
    expected = (
        "rejected_parameter: model 'm-1' refuses parameter 'top_k': Extra inputs are not permitted"
    )
    assert [r.error for r in results] == [expected] * 4
    assert [r.error_kind for r in results] == ["rejected_parameter"] * 4
    assert [r.attempts for r in results] == [1, 0, 0, 0]
    assert results[0].raw_response["rejected_parameter"] == "top_k"
    assert [bool(r.raw_response.get("not_sent")) for r in results] == [False, True, True, True]


def test_a_refusal_after_an_answer_does_not_stop_the_calls():
    answers = iter(["fine", None, None])

    def responder(body):
        answer = next(answers, None)
        if answer is not None:
            return answer
        return (400, json.dumps({"error": {"message": TEMPERATURE_MESSAGE}}).encode())

    with FakeLLM(responder=responder) as llm:
        results = _call_all(_config(llm), 3)
        assert llm.requests == 3  # an answered call means the parameter is not always refused
    assert [r.error_kind for r in results] == [None, "rejected_parameter", "rejected_parameter"]


def test_a_run_whose_calls_are_all_refused_stops_early_with_one_error(
    django_capture_on_commit_callbacks,
):
    suite = Suite.objects.create(name="s")
    for i in range(10):
        Case.objects.create(suite=suite, key=f"c{i}", input=f"[fault=400-temperature] q{i}")
    with FakeLLM() as llm:
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(
                suite=suite,
                name="r",
                target=_config(llm, concurrency=1, settings={"temperature": 0}),
                graders=[{"key": "e", "kind": "exact", "config": {"value": "x"}}],
                trials_per_case=2,
            )
        assert llm.requests == 1  # one chunk, one call in flight: the rest was not sent
    run.refresh_from_db()
    assert (run.status, run.trials_errored) == (Run.Status.FAILED, 20)
    assert run.error_message == (
        "20 of 20 trials errored: rejected_parameter: model 'm-1' refuses parameter "
        f"'temperature': {TEMPERATURE_MESSAGE}"
    )
    assert Trial.objects.filter(run=run, raw_response__not_sent=True).count() == 19


def test_a_judge_run_whose_calls_are_all_refused_stops_early_naming_model_and_parameter(
    django_capture_on_commit_callbacks,
):
    with FakeLLM() as llm:
        trials = make_trials([f"[fault=400-temperature] answer {i}" for i in range(6)])
        version = make_version(llm, max_attempts=1, concurrency=1, temperature=0)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
        assert llm.requests == 1  # one paid call; the other five are errored without a call
    judge_run = JudgeRun.objects.get()
    assert (judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == ("failed", 6, 6)
    assert judge_run.error_message == (
        "stopped: the provider refuses a parameter (rejected_parameter: model 'judge-model' "
        f"refuses parameter 'temperature': {TEMPERATURE_MESSAGE}); no further calls were made"
    )


def test_an_upstream_error_body_is_stored_as_an_excerpt_of_at_most_2_kb():
    page = json.dumps({"error": {"message": "é" * 100_000, "type": "huge"}}).encode()
    with FakeLLM(responder=lambda b: (400, page)) as llm:
        (result,) = _call_all(_config(llm), 1)
    body = result.raw_response["body"]
    assert body["truncated"] is True and body["bytes"] == len(page)
    assert len(body["excerpt"].encode()) <= MAX_ERROR_BODY_BYTES
    assert page.decode().startswith(body["excerpt"])
    message = result.error.removeprefix("client_error 400: ")
    assert len(message.encode()) <= MAX_ERROR_BODY_BYTES and set(message) == {"é"}
    assert len(json.dumps(result.raw_response).encode()) < 3 * MAX_ERROR_BODY_BYTES


def test_a_small_error_body_is_kept_whole():
    body = {"error": {"message": "bad request", "type": "invalid_request_error"}}
    with FakeLLM(responder=lambda b: (400, json.dumps(body).encode())) as llm:
        (result,) = _call_all(_config(llm), 1)
    assert result.raw_response == {"status": 400, "body": body}
    assert result.error == "client_error 400: bad request"


CATASTROPHIC = r"(?:(a|aa)+)+c"


@pytest.mark.parametrize("kind", ["regex", "numeric"])
def test_a_catastrophic_pattern_is_an_errored_grade_within_the_time_limit(monkeypatch, kind):
    monkeypatch.setattr(graders, "REGEX_TIME_LIMIT_S", 0.05)
    pattern = CATASTROPHIC if kind == "regex" else r"(?:(?:a|aa)+)+c(\d)"
    config = {"pattern": pattern} if kind == "regex" else {"pattern": pattern, "value": 1}
    (spec,) = parse_grader_specs([{"key": "g", "kind": kind, "config": config}])
    result = run_grader(spec, case=None, output="a" * 60)
    assert result.passed is None
    assert "took longer than 0.05 s" in result.reason


def test_an_ordinary_pattern_still_grades_under_the_limit():
    (spec,) = parse_grader_specs([{"key": "g", "kind": "regex", "config": {"pattern": "^a+$"}}])
    assert run_grader(spec, case=None, output="a" * 10_000).passed is True
