"""Judge calls in the ledger keep their token classes and the price they were given;
``reprice_run`` prices them again with the run's trials (``judges.ledger.run_calls_reprice``)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from evals.reprice import run_reprice
from judges.models import JudgeCallRecord
from providers.models import ModelPrice
from tests.fakellm import FakeLLM
from tests.judge_builders import judge_grade_one, make_trials, make_version, verdict_json

pytestmark = pytest.mark.django_db


def test_a_judge_call_priced_later_is_repriced_only_on_request():
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        trial = make_trials(["Paris"])[0]
        judge_grade_one(trial=trial, judge_version=make_version(llm, model="acme-judge-1"))
    call = JudgeCallRecord.objects.get()
    assert call.input_tokens > 0 and call.output_tokens > 0
    assert (call.cache_read_tokens, call.reasoning_tokens, call.cache_write_tokens) == (0, 0, None)
    assert call.cost_usd is None
    assert call.cost_basis["unknown"] == ["no price for 'acme-judge-1'"]

    ModelPrice.objects.create(model="acme-judge*", input_usd_per_mtok="3", output_usd_per_mtok="15")
    call.refresh_from_db()
    assert call.cost_usd is None

    repricing = run_reprice(run=trial.run)

    call.refresh_from_db()
    # 3 and 15 USD per 1M input and output tokens (0 cached, 0 reasoning: not needed).
    expected = (
        Decimal(call.input_tokens) * Decimal("3") + Decimal(call.output_tokens) * Decimal("15")
    ) / Decimal(1_000_000)
    assert call.cost_usd == expected
    assert call.price_source == "project override"
    assert call.cost_basis["classes"] == ["input", "output"]
    assert (repricing.judge_calls.changed, repricing.trials.changed) == (1, 0)
    assert repricing.record.judge_calls_changed == 1
    assert repricing.record.new_usd == expected
    assert run_reprice(run=trial.run).judge_calls.changed == 0
