"""The judge call ledger tells calls sent from calls claimed and never sent
(``judges.ledger``: ``claimed`` -> ``sent`` when the first request goes out, through the
limiter's send hook): a call waiting for the endpoint's limiter is ``claimed`` until it
goes out; a call that ends with no request made stays ``claimed`` and is not counted as a
call sent; a lost worker's sent call whose trial another call judged counts as paid again.
The real-worker kill tests are in test_judge_worker_loss.py."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

import pytest

from evals.models import Grade
from evals.report.selectors import run_report
from judges import ledger
from judges.grading import judge_grade_trials
from judges.ledger import spend_from_rows
from judges.models import JudgeCallRecord
from providers.limiter import Limiter
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version, verdict_json

pytestmark = pytest.mark.django_db

CLAIMED, SENT, ANSWERED = "claimed", "sent", "answered"


def test_a_call_waiting_for_the_limiter_is_claimed_until_it_goes_out(monkeypatch):
    """The endpoint's only slot is held elsewhere until the judge's call is in the ledger:
    it is there ``claimed``, then, once the slot is given back and it goes out, ``sent``,
    then answered, and counted once."""
    key = f"ledger-sent-{time.time_ns()}"
    holder = Limiter(key=key, capacity=1, lease_s=30)
    loop = asyncio.new_event_loop()  # the holder's store client belongs to one loop
    slot = loop.run_until_complete(holder.acquire())
    opened, marked = [], []
    real_open, real_sent = ledger.judge_calls_open, ledger.judge_calls_sent

    def open_then_free(**kwargs):
        real_open(**kwargs)
        nonces = [c.nonce for c in kwargs["calls"]]
        opened.append(list(JudgeCallRecord.objects.filter(nonce__in=nonces).values_list("status")))
        loop.run_until_complete(holder.release(slot))  # now the call may go out

    def noting(*, nonces):
        nonces = list(nonces)
        marked.append(list(JudgeCallRecord.objects.filter(nonce__in=nonces).values_list("status")))
        return real_sent(nonces=nonces)

    monkeypatch.setattr(ledger, "judge_calls_open", open_then_free)
    monkeypatch.setattr(ledger, "judge_calls_sent", noting)
    with FakeLLM(responder=lambda body: verdict_json("PASS")) as llm:
        version = make_version(llm, concurrency=1, limit_key=key)
        trials = make_trials(["Paris"])
        assert judge_grade_trials(trials=trials, judge_version=version) == 1
        bill = llm.requests
    loop.run_until_complete(holder.aclose())
    loop.close()

    assert opened == [[(CLAIMED,)]]  # opened while it waited for the slot
    assert marked == [[(CLAIMED,)]]  # then marked sent as it went out
    record = JudgeCallRecord.objects.get()
    assert (record.status, record.outcome, record.attempts) == (ANSWERED, "stored", 1)
    spend = run_report(run=trials[0].run).judge_calls
    assert (bill, spend.calls, spend.unsent) == (1, 1, 0)


def test_calls_that_end_with_no_request_made_stay_claimed_and_are_not_calls_sent():
    """The model refuses a parameter: the first call is sent and fails; the client sends
    nothing more, so the next calls end with no request made (``attempts`` 0)."""
    with FakeLLM() as llm:
        version = make_version(llm, concurrency=1)
        outputs = [f"[fault=400-temperature] answer {i}" for i in range(3)]
        trials = make_trials(outputs)
        judge_grade_trials(trials=trials, judge_version=version)
        bill = llm.requests

    statuses = sorted(JudgeCallRecord.objects.values_list("status", "attempts"))
    assert statuses == [(CLAIMED, 0), (CLAIMED, 0), ("failed", 1)]
    assert Grade.objects.filter(status="error").count() == 3  # errored grades, never a pass
    spend = run_report(run=trials[0].run).judge_calls
    assert (bill, spend.calls, spend.requests, spend.unsent) == (1, 1, 1, 2)
    assert spend.input_unknown == 1  # over the calls sent only


def _row(status, outcome="", *, attempts=1, tokens=None, cost=None, trial=1, grader="j"):
    return (status, outcome, attempts, tokens, tokens, cost, trial, grader)


def test_the_spend_counts_calls_sent_and_the_calls_a_lost_worker_had_paid_again():
    rows = [
        _row(ANSWERED, "stored", tokens=10, cost="0.01", trial=1),
        _row(SENT, trial=2),  # a lost worker's, in flight or answered and not written
        _row(ANSWERED, "stored", tokens=10, cost="0.01", trial=2),  # judged again
        _row(SENT, trial=3),  # lost, its trial not judged again (yet)
        _row(CLAIMED, trial=4, attempts=0),  # never sent
        _row(CLAIMED, "stored", trial=5, attempts=0),  # ended with no request made
        _row(ANSWERED, "lost", tokens=10, cost="0.01", trial=1),
    ]
    spend = spend_from_rows(rows)
    assert (spend.calls, spend.unsent, spend.unanswered, spend.repaid, spend.lost) == (
        5,
        2,
        2,
        1,
        1,
    )
    assert spend.requests == 5
    assert (spend.input, spend.input_unknown) == (30, 2)
    assert (spend.known_usd, spend.cost_unknown) == (Decimal("0.03"), 2)
    assert spend_from_rows([_row(CLAIMED, attempts=0)]).calls == 0
