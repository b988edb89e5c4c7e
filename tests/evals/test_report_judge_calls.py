"""The run report's "Judge calls" line: judge tokens and cost apart from the target's,
null-aware (an unknown price is unknown, never $0), skipped ladder grades left out."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from evals.models import Grade
from evals.report.selectors import run_report
from judges import client as judge_client
from judges.models import JudgeCallRecord
from judges.versions import judge_version_create
from tests.fakellm import FakeLLM
from tests.judge_builders import judge_grade_one, make_trials, make_version, verdict_json

pytestmark = pytest.mark.django_db


def _version():
    version, _ = judge_version_create(
        judge_name="j",
        kind="rubric",
        model="judge-model",
        base_url="http://127.0.0.1:9/v1",
        prompt_template="",
        params={},
        output_schema={},
    )
    return version


def _call(trial, version, nonce, **fields):
    JudgeCallRecord.objects.create(
        nonce=nonce,
        judge_version=version,
        run=trial.run,
        trial=trial,
        grader="j1",
        **{"status": "answered", "outcome": "stored", "attempts": 1, **fields},
    )


def test_it_sums_judge_tokens_and_known_costs_from_the_ledger_and_counts_the_unknown():
    """The source is the call ledger, one row per call paid: a call whose grade lost a race
    counts, a call with no answer recorded counts with unknown tokens and cost, and a grade
    that made no call (a skipped rung) counts nothing."""
    version = _version()
    trials = make_trials(["Paris", "Paris", "Paris", "Paris"])
    _call(trials[0], version, "n0", input_tokens=100, output_tokens=20, cost_usd="0.0015")
    _call(trials[1], version, "n1", input_tokens=50, output_tokens=None, cost_usd="0.0005")
    _call(trials[2], version, "n2", input_tokens=None, output_tokens=5, cost_usd=None)
    _call(
        trials[2],
        version,
        "n2-lost",
        input_tokens=10,
        output_tokens=1,
        cost_usd="0.0001",
        outcome="lost",
        attempts=2,
    )
    _call(trials[1], version, "n1-dead", status="sent", outcome="", attempts=None)
    Grade.objects.create(
        trial=trials[3],
        grader="j1",
        judge_version=version,
        status="not_judged",
        passed=None,
        details={"decided_by": "exact", "skipped": True},  # made no call: no ledger row
    )
    calls = run_report(run=trials[0].run).judge_calls
    assert (calls.calls, calls.input, calls.input_unknown, calls.output, calls.output_unknown) == (
        5,
        160,
        2,
        26,
        2,
    )
    assert (calls.known_usd, calls.cost_unknown) == (Decimal("0.0021"), 2)
    assert (calls.lost, calls.unanswered, calls.requests) == (1, 1, 6)


def test_a_run_without_judge_calls_has_no_judge_calls_line(client, carol):
    trial = make_trials(["Paris"])[0]
    Grade.objects.create(trial=trial, grader="exact", status="ok", passed=True)
    assert run_report(run=trial.run).judge_calls is None
    client.force_login(carol)
    page = client.get(reverse("evals:run-detail", args=[trial.run.uuid])).content.decode()
    assert "Judge calls" not in page


def test_the_run_page_shows_judge_calls_apart_with_an_unknown_price(client, carol, monkeypatch):
    async def fake_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        trials = make_trials(["Paris", "Paris"])
        version = make_version(llm)  # judge-model has no price
        for trial in trials:
            judge_grade_one(trial=trial, judge_version=version)
    tokens = [g.details["input_tokens"] for g in Grade.objects.all()]
    assert all(t > 0 for t in tokens)
    client.force_login(carol)
    page = client.get(reverse("evals:run-detail", args=[trials[0].run.uuid])).content.decode()
    assert f"2 calls sent: {sum(tokens)} input" in page
    assert '; cost unknown <span class="muted">· not included in the cost above' in page
    assert "$0.0000" not in page
