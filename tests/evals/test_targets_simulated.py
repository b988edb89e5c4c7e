"""The simulated target: deterministic by (seed, case, attempt), outputs the graders agree with."""

from __future__ import annotations

import asyncio
import hashlib
import struct

import pytest

from core.errors import DomainError
from evals.grading.grader_config import parse_grader_specs
from evals.grading.graders import run_grader
from evals.runner.targets import CaseInput, target_from_config
from evals.runner.targets.simulated import (
    SIMULATED_ERROR,
    SimulatedTarget,
    simulated_draw,
    wrong_answer,
)


def _results(config: dict, cases: list[CaseInput]):
    async def go():
        target = target_from_config({"kind": "simulated", **config})
        return [await target.call(case) for case in cases]

    return asyncio.run(go())


def _trials(key: str, expected, n: int) -> list[CaseInput]:
    return [CaseInput(key=key, input="q", expected=expected, attempt=a) for a in range(1, n + 1)]


def test_it_gives_the_same_results_for_the_same_seed_case_and_attempt_in_any_order():
    cases = _trials("c1", "Paris", 20) + _trials("c2", 4, 20)
    config = {"seed": 7, "default_pass_probability": 0.5, "error_probability": 0.2}

    first = _results(config, cases)
    second = _results(config, list(reversed(cases)))[::-1]
    other_seed = _results({**config, "seed": 8}, cases)

    assert [r.output for r in first] == [r.output for r in second]
    assert [r.error for r in first] == [r.error for r in second]
    assert [r.output for r in first] != [r.output for r in other_seed]


def test_its_draws_are_a_fixed_hash_not_pythons_salted_hash():
    assert simulated_draw(1234, "c1", 1, "pass") == pytest.approx(
        simulated_draw(1234, "c1", 1, "pass")
    )
    # pinned value: blake2b-64 of "1234|c1|1|pass" / 2^64

    digest = hashlib.blake2b(b"1234|c1|1|pass", digest_size=8).digest()
    assert simulated_draw(1234, "c1", 1, "pass") == struct.unpack(">Q", digest)[0] / 2**64


def test_it_passes_each_case_at_about_its_configured_probability():
    cases = _trials("easy", "yes", 400) + _trials("hard", "yes", 400)
    config = {"seed": 1, "pass_probability": {"easy": 0.9, "hard": 0.1}}

    results = _results(config, cases)

    easy = sum(r.output == "yes" for r in results[:400]) / 400
    hard = sum(r.output == "yes" for r in results[400:]) / 400
    assert 0.85 <= easy <= 0.95
    assert 0.05 <= hard <= 0.15


def test_it_always_passes_at_probability_one_and_always_fails_at_zero():
    passing = _results(
        {"seed": 3, "default_pass_probability": 1}, _trials("c", {"b": 2, "a": 1}, 10)
    )
    failing = _results(
        {"seed": 3, "default_pass_probability": 0}, _trials("c", {"b": 2, "a": 1}, 10)
    )

    assert {r.output for r in passing} == {'{"a":1,"b":2}'}
    assert {r.output for r in failing} == {'{"b":2}'}


def test_it_errors_at_the_error_probability_with_a_clear_message():
    results = _results({"seed": 5, "error_probability": 1}, _trials("c", "x", 3))

    assert all(r.error == SIMULATED_ERROR and r.output == "" for r in results)
    assert all(r.model == "simulated" for r in results)


def test_it_reports_the_simulated_model_tokens_and_latency():
    [result] = _results(
        {"seed": 5, "latency_ms": [100, 200]},
        [CaseInput(key="c", input="x" * 40, expected="abcdefgh")],
    )

    assert result.model == "simulated"
    assert result.input_tokens == 10
    assert result.output_tokens == -(-len(result.output) // 4)
    assert 100 <= result.latency_ms <= 200
    assert result.raw_response["simulated"] is True


GRADERS = parse_grader_specs(
    [
        {"key": "exact", "kind": "exact"},
        {"key": "normalized", "kind": "normalized"},
    ]
)


@pytest.mark.parametrize(
    "expected",
    ["Paris", "1,234", 4, 0, -3, 2.5, True, {"policy_id": "P-1", "amount": 3}, [1, 2], [], {}],
)
def test_exact_and_normalized_graders_pass_its_passes_and_fail_its_fails(expected):
    cases = _trials("c", expected, 30)
    passing = _results({"seed": 2, "default_pass_probability": 1}, cases)
    failing = _results({"seed": 2, "default_pass_probability": 0}, cases)

    for case, result in zip(cases, passing, strict=True):
        assert all(run_grader(g, case=case, output=result.output).passed for g in GRADERS)
    for case, result in zip(cases, failing, strict=True):
        assert not any(run_grader(g, case=case, output=result.output).passed for g in GRADERS)


def test_the_numeric_and_contains_graders_fail_its_wrong_answers():
    numeric = parse_grader_specs([{"key": "n", "kind": "numeric", "config": {"rel_tol": 0.49}}])[0]
    contains = parse_grader_specs([{"key": "c", "kind": "contains"}])[0]
    for attempt in range(1, 30):
        number_case = CaseInput(key="n", input="q", expected=96.12, attempt=attempt)
        text_case = CaseInput(key="t", input="q", expected="not", attempt=attempt)
        [n_out, t_out] = [
            r.output
            for r in _results(
                {"seed": attempt, "default_pass_probability": 0}, [number_case, text_case]
            )
        ]
        assert run_grader(numeric, case=number_case, output=n_out).passed is False
        assert run_grader(contains, case=text_case, output=t_out).passed is False


def test_a_wrong_answer_never_contains_the_expected_text():
    assert "no" not in wrong_answer("No", key="k", attempt=1, u=0.0).casefold().split()
    assert (
        wrong_answer("determined", key="k", attempt=1, u=0.0)
        == "I'm not sure; the documents do not say."
    )


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({}, "target.seed"),
        ({"seed": "1"}, "target.seed"),
        ({"seed": 1, "default_pass_probability": 1.5}, "target.default_pass_probability"),
        ({"seed": 1, "pass_probability": {"c1": -0.1}}, "target.pass_probability.c1"),
        ({"seed": 1, "error_probability": "0"}, "target.error_probability"),
        ({"seed": 1, "latency_ms": [5, 1]}, "target.latency_ms"),
        ({"seed": 1, "model": "gpt-4o"}, "target.model"),
        ({"seed": 1, "pass_rate": 0.5}, "target.pass_rate"),
        ({"seed": 1, "concurrency": 0}, "target.concurrency"),
        ({"seed": 1, "concurrency": 1025}, "target.concurrency"),
        ({"seed": 1, "concurrency": 2.0}, "target.concurrency"),
        ({"seed": 1, "concurrency": True}, "target.concurrency"),
    ],
)
def test_it_refuses_a_bad_config_naming_the_field(config, field):
    with pytest.raises(DomainError, match=field.replace(".", r"\.")):
        target_from_config({"kind": "simulated", **config})


@pytest.mark.parametrize(("given", "in_flight"), [({"concurrency": 3}, 3), ({}, 16)])
def test_it_takes_a_concurrency_the_call_pool_honours(given, in_flight):
    target = target_from_config({"kind": "simulated", "seed": 1, **given})
    assert target.concurrency == in_flight


def test_it_uses_the_listed_wrong_outputs_for_a_failing_case():

    wrong = ['{"decision": "needs_approval", "policy_id": "EXP-7"}', '{"decision": "approved"}']
    target = SimulatedTarget.from_config(
        {
            "kind": "simulated",
            "seed": 3,
            "default_pass_probability": 0.0,
            "wrong_outputs": {"c1": wrong},
        }
    )
    outputs = {
        asyncio.run(target.call(CaseInput(key="c1", input="q", expected="a", attempt=n))).output
        for n in range(1, 40)
    }
    assert outputs == set(wrong)


def test_it_refuses_wrong_outputs_that_are_not_lists_of_strings():

    with pytest.raises(DomainError, match="target.wrong_outputs.c1"):
        SimulatedTarget.from_config({"kind": "simulated", "seed": 1, "wrong_outputs": {"c1": [1]}})
