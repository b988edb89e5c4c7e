"""A tiny known cost is never stored, shown or summed as 0 (zero means free): a price that
makes each call cost 3e-9 USD gives trials, totals, pages, API and exports of 3e-9 USD a
trial (the cost column kept 8 decimals and stored it as 0)."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.test import Client

import evals.runner.start as start_module
from core.bounds import cost_problem
from core.decimals import PLAIN_MAX_PLACES, decimal_plain
from core.registry import registered
from evals.models import Trial
from evals.runner.execute import trial_chunk_execute
from evals.runner.start import run_start
from judges.ledger import run_judge_spend
from judges.models import JudgeCallRecord
from providers.models import ModelPrice
from tests.core.test_api_core import client_for
from tests.evals.test_worker import _suite
from tests.judge_builders import make_version

pytestmark = pytest.mark.django_db

TINY = Decimal("0.000000003")  # 3 input tokens at $0.001 per 1M tokens
PATH = "tests.evals.test_cost_precision"


@registered("pipeline")
def tiny_pipeline(case, **settings) -> dict:
    """A pipeline whose every call is 3 input tokens of ``tiny-model``."""
    return {"output": "yes", "input_tokens": 3, "output_tokens": 0, "model": "tiny-model"}


@pytest.fixture
def tiny_run(monkeypatch):
    ModelPrice.objects.create(
        model="tiny-model", input_usd_per_mtok=Decimal("0.001"), output_usd_per_mtok=0
    )
    held: list[list[int]] = []
    monkeypatch.setattr(start_module, "_chunks_enqueue", lambda run_id, chunks: held.extend(chunks))
    run = run_start(
        suite=_suite(3),
        name="tiny",
        target={"kind": "callable", "path": f"{PATH}:tiny_pipeline"},
        graders=[{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}],
        trials_per_case=2,
    )
    for ids in held:
        trial_chunk_execute(run_id=run.id, trial_ids=ids)
    run.refresh_from_db()
    return run


def test_a_tiny_known_cost_is_stored_exactly_on_every_trial(tiny_run):
    costs = list(Trial.objects.filter(run=tiny_run).values_list("cost_usd", flat=True))
    assert costs == [TINY] * 6 and all(c > 0 for c in costs)


def test_a_tiny_known_cost_is_summed_and_shown_non_zero(tiny_run, alice):
    total = 6 * TINY
    body = client_for(alice).get(f"/api/runs/{tiny_run.uuid}/").json()
    cost = body["report"]["cost"]
    assert Decimal(cost["known_usd"]) == Decimal(cost["total_usd"]) == total
    assert Decimal(cost["per_passing_trial_usd"]) == TINY
    trials = client_for(alice).get(f"/api/trials/?run={tiny_run.uuid}").json()["results"]
    assert {Decimal(t["cost_usd"]) for t in trials} == {TINY}
    client = Client()
    client.force_login(alice)
    page = client.get(f"/runs/{tiny_run.uuid}/").content.decode()
    assert "$0.000000018" in page  # 6 trials × $0.000000003
    exported = client.get(f"/runs/{tiny_run.uuid}/export/?format=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert len(rows) == 6 and {Decimal(r["cost_usd"]) for r in rows} == {TINY}


def test_a_tiny_judge_call_cost_is_stored_and_summed_non_zero(tiny_run):
    version = make_version(type("Llm", (), {"base_url": "http://127.0.0.1:9/v1"}))
    for i, trial in enumerate(Trial.objects.filter(run=tiny_run)):
        JudgeCallRecord.objects.create(
            nonce=f"n{i}",
            judge_version=version,
            run=tiny_run,
            trial=trial,
            status="answered",
            cost_usd=TINY,
        )
    stored = set(JudgeCallRecord.objects.values_list("cost_usd", flat=True))
    assert stored == {TINY}
    assert run_judge_spend(run_id=tiny_run.id).known_usd == 6 * TINY


def test_a_positive_cost_that_would_be_stored_as_zero_is_refused_not_rounded():
    assert cost_problem(TINY) is None and cost_problem(Decimal(0)) is None
    assert cost_problem(Decimal("5e-13")) is None  # stored as 1e-12
    # Amounts in plain decimals, never "4E-13" or "1E-12" (core.decimals.decimal_plain).
    assert cost_problem(Decimal("4e-13")) == (
        "a known cost of 0.0000000000004 USD would be stored as 0 (which means free): costs are "
        "stored to 0.000000000001 USD; give 0 or leave the cost empty (unknown)"
    )
    assert cost_problem(Decimal("2E+6")) == "expected USD from 0 to below 1,000,000, got 2000000"
    assert cost_problem(Decimal("-1E-20")) == (
        "expected USD from 0 to below 1,000,000, got -0.00000000000000000001"
    )


def test_a_cost_with_a_huge_exponent_is_refused_in_a_short_message():
    """Found by a tester: ``"1e-999999999"`` made a 1 GB error message (the amount written
    out in full). Past ``PLAIN_MAX_PLACES`` places an amount is shown as it was given."""
    for text in ("1e-999999999", "9e+999999999", "0E-999999999", "-1e-101"):
        value = Decimal(text)
        message = cost_problem(value)
        shown = decimal_plain(value)
        assert len(shown) <= len(text) + 2 and shown.upper() == str(value).upper(), text
        if text != "0E-999999999":  # zero is a known, free cost
            assert message is not None and len(message) < 300 and shown in message, text
    assert decimal_plain(Decimal(f"1e-{PLAIN_MAX_PLACES}")) == "0." + "0" * 99 + "1"
    assert decimal_plain(Decimal("0E-8")) == "0.00000000"
