"""A trial stores each token class its answer reported, and is priced by class: the shared
mock's ``POST /v1/messages`` (cache counts 0) through ``run_suite``, end to end."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from evals.models import Case, Run, Suite
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAITarget
from tests.fakellm import FakeLLM, tool_calls_message
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

KEY = "test-anthropic-key"


def test_an_anthropic_trial_stores_its_cache_counts_and_is_priced_by_class(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    monkeypatch.setenv("ASSAY_ANTHROPIC_TEST_API_KEY", KEY)
    server = mockllm("--latency-ms", "1", "--anthropic-api-key", KEY)
    suite = Suite.objects.create(name="haiku")
    Case.objects.create(suite=suite, key="c0", input="[case=c0 p=1.0 expect=A] Q", expected="A")
    target = tmp_path / "target.json"
    target.write_text(
        json.dumps(
            {
                "kind": "openai",
                "provider": "anthropic",
                "base_url": server.base_url,
                "model": "claude-haiku-4-5-20251001",
                "api_key_env": "ASSAY_ANTHROPIC_TEST_API_KEY",
                "prompt_template": "$input",
                "settings": {"max_tokens": 64},
            }
        )
    )
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps([{"key": "exact", "kind": "exact"}]))
    out = StringIO()
    call_command(
        "run_suite", "haiku", "--target", str(target), "--graders", str(graders),
        "--trials", "2", "--wait", "--json", stdout=out,
    )  # fmt: skip

    run = Run.objects.get(uuid=json.loads(out.getvalue())["run"])
    for trial in run.trials.all():
        assert trial.input_tokens > 0 and trial.output_tokens > 0
        assert (trial.cache_write_tokens, trial.cache_read_tokens) == (0, 0)
        assert trial.reasoning_tokens is None  # Anthropic does not report it apart
        # claude-haiku-4-5: 1.00 and 5.00 USD per 1M input and output tokens; the cache
        # classes are priced too (1.25, 0.10) but were 0.
        expected = (
            Decimal(trial.input_tokens) * Decimal("1.00")
            + Decimal(trial.output_tokens) * Decimal("5.00")
        ) / Decimal(1_000_000)
        assert trial.cost_usd == expected
        assert trial.cost_basis == {
            "model": "claude-haiku-4-5-20251001",
            "price": "claude-haiku-4-5*",
            "source": "built-in",
            "classes": ["input", "output"],
        }


def test_a_tool_loop_trial_sums_its_calls_classes_class_by_class():
    def respond(body):
        answered = any(m.get("role") == "tool" for m in body["messages"])
        return "Done." if answered else tool_calls_message(("lookup_order", {"order_id": "A1"}))

    async def no_price(model):
        return None

    async def go(llm):
        target = OpenAITarget.from_config(
            {
                "kind": "openai",
                "base_url": llm.base_url,
                "model": "example-model-1.5",
                "prompt_template": "$input",
                "tools": ["tests.evals.agent_tools:lookup_order"],
                "environment": "tests.evals.agent_tools:environment",
                "max_attempts": 1,
            },
            pricer=no_price,
        )
        try:
            return await target.call(CaseInput(key="A1", input="order A1?"))
        finally:
            await target.aclose()

    with FakeLLM(responder=respond) as llm:
        result = asyncio.run(go(llm))
    assert result.ok, result.error
    calls = [s for s in result.trajectory if "input_tokens" in s]
    assert len(calls) == 2
    assert result.input_tokens == sum(s["input_tokens"] for s in calls)
    assert result.output_tokens == sum(s["output_tokens"] for s in calls)
    # The fake reports 0 cached and 0 reasoning tokens per call, no cache write (unknown).
    assert (result.cache_read_tokens, result.reasoning_tokens) == (0, 0)
    assert result.cache_write_tokens is None
