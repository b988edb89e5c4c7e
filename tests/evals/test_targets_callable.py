"""The Python-callable target: sync and async pipelines, errors as data, names that are not
registered pipelines refused, settings the function does not take refused by name."""

from __future__ import annotations

import asyncio
import threading
import time
from decimal import Decimal

import pytest

from core.errors import DomainError
from core.registry import registered
from evals.runner.targets import CaseInput, target_from_config
from evals.runner.targets.pycallable import CallableConfig

PATH = "tests.evals.test_targets_callable"
IN_FLIGHT = {"now": 0, "max": 0}
LOCK = threading.Lock()
NOT_CALLABLE = 3


@registered("pipeline")
def shout(case: CaseInput, *, suffix: str = "!") -> str:
    return f"{case.input.upper()}{suffix}"


@registered("pipeline")
async def shout_async(case: CaseInput, **settings) -> dict:
    await asyncio.sleep(0)
    return {"output": case.input[::-1], "input_tokens": 7, "output_tokens": 2, "model": "m-1"}


@registered("pipeline")
def cached_pipeline(case: CaseInput) -> dict:
    return {
        "output": "ok",
        "input_tokens": 5,
        "output_tokens": 2,
        "cache_write_tokens": 0,
        "cache_read_tokens": 100,
        "reasoning_tokens": 3,
    }


@registered("pipeline")
def negative_cache(case: CaseInput) -> dict:
    return {"output": "x", "cache_read_tokens": -1}


@registered("pipeline")
def explode(case: CaseInput) -> str:
    raise ValueError(f"no answer for {case.key}")


@registered("pipeline")
def wrong_shape(case: CaseInput) -> int:
    return 42


@registered("pipeline")
def negative_tokens(case: CaseInput) -> dict:
    return {"output": "x", "input_tokens": -1}


@registered("pipeline")
def slow(case: CaseInput) -> str:
    with LOCK:
        IN_FLIGHT["now"] += 1
        IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])
    time.sleep(0.05)
    with LOCK:
        IN_FLIGHT["now"] -= 1
    return "done"


@registered("pipeline")
def priced_agent(case: CaseInput) -> dict:
    steps = [
        {"kind": "message", "content": "a", "input_tokens": 10, "cost_usd": 0.0001},
        {"kind": "tool_call", "name": "t", "arguments": {}, "input_tokens": 5, "cost_usd": 0.0002},
        {"kind": "tool_result", "content": "ok"},
    ]
    if case.key == "stated":
        return {"output": "x", "cost_usd": 0.5, "trajectory": steps}
    if case.key == "unknown":
        steps[1].pop("cost_usd")  # a model call of unknown cost: the sum is unknown
    if case.key == "null":
        return {"output": "x", "cost_usd": None, "trajectory": steps}
    if case.key == "bad":
        return {"output": "x", "cost_usd": -1}
    return {"output": "x", "trajectory": steps}


def _run(config: dict, cases: list[CaseInput]):
    async def go():
        target = target_from_config(config)
        try:
            return await asyncio.gather(*(target.call(case) for case in cases))
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_it_runs_a_sync_function_with_the_settings_as_keywords():
    config = {"kind": "callable", "path": f"{PATH}:shout", "settings": {"suffix": "?"}}

    [result] = _run(config, [CaseInput(key="c1", input="hi")])

    assert result.ok
    assert result.output == "HI?"
    assert result.input_tokens is None
    assert result.output_tokens is None
    assert result.latency_ms >= 0


def test_it_awaits_a_coroutine_function_and_keeps_its_token_counts_and_model():
    [result] = _run({"kind": "callable", "path": f"{PATH}:shout_async"}, [CaseInput("c1", "abc")])

    assert result.output == "cba"
    assert (result.input_tokens, result.output_tokens, result.model) == (7, 2, "m-1")
    assert result.raw_response["output"] == "cba"


def test_it_keeps_every_token_class_a_pipeline_states():
    [result] = _run({"kind": "callable", "path": f"{PATH}:cached_pipeline"}, [CaseInput("c", "")])

    assert (result.input_tokens, result.output_tokens) == (5, 2)
    assert (result.cache_write_tokens, result.cache_read_tokens, result.reasoning_tokens) == (
        0,
        100,
        3,
    )
    [result] = _run({"kind": "callable", "path": f"{PATH}:shout_async"}, [CaseInput("c", "x")])
    assert result.cache_read_tokens is None  # not stated: unknown


def test_it_turns_an_exception_into_an_errored_result():
    [result] = _run({"kind": "callable", "path": f"{PATH}:explode"}, [CaseInput("c9", "x")])

    assert not result.ok
    assert result.output == ""
    assert result.error == "ValueError: no answer for c9"


@pytest.mark.parametrize(
    ("function", "words"),
    [
        ("wrong_shape", "TypeError: expected a str"),
        ("negative_tokens", "'input_tokens'"),
        ("negative_cache", "'cache_read_tokens'"),
    ],
)
def test_it_errors_on_a_return_value_of_the_wrong_shape(function, words):
    [result] = _run({"kind": "callable", "path": f"{PATH}:{function}"}, [CaseInput("c1", "x")])

    assert not result.ok
    assert words in result.error


def test_it_bounds_calls_in_flight_by_the_configured_concurrency():
    IN_FLIGHT.update(now=0, max=0)
    config = {"kind": "callable", "path": f"{PATH}:slow", "concurrency": 3}

    results = _run(config, [CaseInput(f"c{i}", "x") for i in range(12)])

    assert all(result.output == "done" for result in results)
    assert IN_FLIGHT["max"] == 3


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"path": "tests.no_such_module_xyz:f"}, "is not a registered pipeline"),
        ({"path": "os:system"}, "'os:system' is not a registered pipeline"),
        ({"path": f"{PATH}:missing"}, "is not a registered pipeline"),
        ({"path": f"{PATH}:NOT_CALLABLE"}, "is not a registered pipeline"),
        ({"path": "tests.grader_oracles:as_dict"}, "registered for grader only, not as a pipeline"),
        ({"path": ""}, "expected a registered pipeline's name"),
        ({"path": None}, "expected a registered pipeline's name"),
        ({"path": f"{PATH}:shout", "settings": {"suffix": "?", "shell": 1}}, "setting 'shell'"),
        ({"path": f"{PATH}:shout", "settings": {"case": 1}}, "target.settings.case"),
        ({"path": f"{PATH}:shout", "settings": [1]}, "target.settings"),
        ({"path": f"{PATH}:shout", "concurrency": 0}, "target.concurrency"),
        ({"path": f"{PATH}:shout", "concurrency": 10**11}, "from 1 to 1024"),
    ],
)
def test_it_refuses_a_bad_config_naming_the_field(config, words):
    with pytest.raises(DomainError, match="target\\.") as info:
        target_from_config({"kind": "callable", **config})
    assert words in str(info.value)


@registered("pipeline")
def leave(case: CaseInput) -> str:
    raise SystemExit(3)


def test_a_pipeline_that_calls_sys_exit_gives_an_errored_trial_not_a_dead_worker():
    """A user pipeline calling sys.exit() must not take the Celery worker down with it."""
    [result] = _run(
        {"kind": "callable", "path": f"{__name__}:leave"}, [CaseInput(key="a", input="x")]
    )
    assert result.error == "SystemExit: 3" and result.error_kind == "exception"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"settings": {"concurrency": 10**11}}, 1024),  # a setting no parser bounds
        ({"settings": {"concurrency": float("inf")}}, 16),
        ({"settings": {"concurrency": 3}}, 3),
        ({}, 16),
    ],
)
def test_a_chunk_never_starts_more_calls_than_the_bound(config, expected):
    """A chunk starts one coroutine per call in flight and claims two trials per call:
    ``settings.concurrency`` (read when the target sets none) is held to the bound."""
    parsed = CallableConfig.parse({"kind": "callable", "path": f"{PATH}:any", **config})
    assert parsed.concurrency == expected


def test_a_callable_agent_reports_its_cost_stated_or_summed_over_its_steps_unknown_stays_null():
    keys = ["stated", "summed", "unknown", "null", "bad"]
    results = _run(
        {"kind": "callable", "path": f"{PATH}:priced_agent"}, [CaseInput(k, "x") for k in keys]
    )
    by_key = dict(zip(keys, results, strict=True))
    assert by_key["stated"].cost_usd == Decimal("0.5")
    assert by_key["summed"].cost_usd == Decimal("0.0003")
    assert by_key["unknown"].cost_usd is None
    assert by_key["null"].cost_usd is None
    assert not by_key["bad"].ok and "'cost_usd'" in by_key["bad"].error
