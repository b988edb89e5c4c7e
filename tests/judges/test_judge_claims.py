"""Every paid judge call is counted, and none is made twice (issue 13, item 4): claims on
(trial, grader) and pairwise presentations before each call (``judges.claims``), renewed
while in flight and retaken once expired; the call ledger (``judges.ledger``), which keeps
a call whose grade lost a race; the judge rung stopping between calls on a cancel.

The calls are counted where the bill is: the requests a real local endpoint received
(``tests.fakellm``)."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from evals.models import Grade, Run, TrialPair
from evals.report.selectors import run_report
from evals.runner.finalize import run_cancel
from judges import claims, grading
from judges.claims import (
    grade_claims_take,
    holder_new,
    judge_claims_release,
    judge_claims_sweep,
    presentation_claims_take,
)
from judges.grading import judge_grade_trials, run_chunk_judge
from judges.ledger import run_judge_spend
from judges.models import JudgeCallRecord, JudgeClaim, PairwiseVerdict
from judges.pairwise import pairs_judge
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version, verdict_json

pytestmark = pytest.mark.django_db


def _pass(body) -> str:
    return verdict_json("PASS")


def _expire(holder) -> None:
    JudgeClaim.objects.filter(holder=holder).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def _judged_run(trials, version, *, status=Run.Status.RUNNING) -> Run:
    run = trials[0].run
    run.graders = [
        {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}
    ]
    run.status = status
    run.save()
    return run


# --- claims ----------------------------------------------------------------------------------


def test_a_live_claim_is_held_by_one_holder_only():
    with FakeLLM() as llm:
        version = make_version(llm)
    ids = [t.id for t in make_trials(["a", "b", "c"])]
    first, second = holder_new(), holder_new()
    kwargs = {"trial_ids": ids, "grader": "j", "judge_version_id": version.id}
    assert grade_claims_take(holder=first, **kwargs) == set(ids)
    assert grade_claims_take(holder=second, **kwargs) == set()
    assert grade_claims_take(holder=first, **kwargs) == set(ids)  # idempotent for its holder
    assert JudgeClaim.objects.count() == 3


def test_an_expired_claim_is_taken_over_and_its_old_holder_no_longer_renews_it():
    with FakeLLM() as llm:
        version = make_version(llm)
    ids = [t.id for t in make_trials(["a", "b"])]
    dead, alive = holder_new(), holder_new()
    kwargs = {"trial_ids": ids, "grader": "j", "judge_version_id": version.id}
    grade_claims_take(holder=dead, **kwargs)
    _expire(dead)
    assert grade_claims_take(holder=alive, **kwargs) == set(ids)
    assert claims.judge_claims_renew(holder=dead) == 0
    assert claims.judge_claims_renew(holder=alive) == 2
    assert judge_claims_release(holder=dead) == 0  # the old holder cannot drop them either
    assert JudgeClaim.objects.filter(holder=alive).count() == 2


def test_a_claim_on_a_key_already_written_is_released_at_once():
    with FakeLLM() as llm:
        version = make_version(llm)
    trials = make_trials(["a", "b"])
    Grade.objects.create(trial=trials[0], grader="j", judge_version=version, passed=True)
    holder = holder_new()
    held = grade_claims_take(
        trial_ids=[t.id for t in trials], grader="j", judge_version_id=version.id, holder=holder
    )
    assert held == {trials[1].id}
    assert list(JudgeClaim.objects.values_list("trial_id", flat=True)) == [trials[1].id]


def test_a_trial_claimed_by_a_live_holder_is_not_called_and_an_expired_one_is():
    with FakeLLM(responder=_pass) as llm:
        version = make_version(llm)
        trials = make_trials(["a", "b"])
        other = holder_new()
        grade_claims_take(
            trial_ids=[trials[0].id],
            grader=version.grader_key,
            judge_version_id=version.id,
            holder=other,
        )
        assert judge_grade_trials(trials=trials, judge_version=version) == 1
        assert llm.requests == 1  # the held trial is the other worker's to call
        _expire(other)  # that worker died
        assert judge_grade_trials(trials=trials, judge_version=version) == 1
        assert llm.requests == 2
    assert Grade.objects.count() == JudgeCallRecord.objects.count() == 2
    assert not JudgeClaim.objects.exists()


def test_claims_are_renewed_while_a_call_is_in_flight(settings, monkeypatch):
    """A 1 s lease and a call that takes 1.6 s: the claim is renewed every third of a lease
    while the call is in flight, each time still held."""
    settings.ASSAY = {**settings.ASSAY, "TRIAL_LEASE_SECONDS": 1}
    renewals: list[int] = []
    real = claims.judge_claims_renew

    def counted(**kwargs):
        held = real(**kwargs)
        renewals.append(held)
        return held

    monkeypatch.setattr(grading, "judge_claims_renew", counted)
    with FakeLLM(responder=_pass) as llm:
        version = make_version(llm)
        trial = make_trials(["[latency=1600] a"])[0]
        assert judge_grade_trials(trials=[trial], judge_version=version) == 1
    assert len(renewals) >= 3 and set(renewals) == {1}, renewals


# --- the ledger and a race's loser -----------------------------------------------------------


def test_a_race_losers_call_is_recorded_in_the_spend(monkeypatch):
    """Worker A's claim expires while its call is in flight (A was paused); worker B takes
    it over, calls and stores its grade first. A's answer then loses: its grade is not
    stored, but its call is in the ledger (``lost``) and in the run report's judge spend, so
    the spend equals the endpoint's bill."""
    real = grading._grades_store
    nested = []

    def paused_then_store(**kwargs):
        if not nested:  # worker A, answered but not yet written
            nested.append(kwargs["holder"])
            _expire(kwargs["holder"])
            assert judge_grade_trials(trials=trials, judge_version=version) == 1  # worker B
        return real(**kwargs)

    monkeypatch.setattr(grading, "_grades_store", paused_then_store)
    with FakeLLM(responder=_pass) as llm:
        version = make_version(llm)
        trials = make_trials(["Paris"])
        assert judge_grade_trials(trials=trials, judge_version=version) == 0  # A stored none
        bill = llm.requests
    grade = Grade.objects.get()
    records = {r.outcome: r for r in JudgeCallRecord.objects.all()}
    assert (bill, len(records)) == (2, 2)
    assert records["stored"].nonce == grade.details["nonce"]
    assert records["lost"].nonce != grade.details["nonce"]
    assert all(r.status == "answered" and r.input_tokens > 0 for r in records.values())
    spend = run_report(run=trials[0].run).judge_calls
    assert (spend.calls, spend.lost, spend.requests) == (2, 1, bill)
    assert spend.input == sum(r.input_tokens for r in records.values())
    assert spend.known_usd is None and spend.cost_unknown == 2  # judge-model has no price
    assert not JudgeClaim.objects.exists()


def test_a_call_whose_answer_was_never_written_stays_counted_with_unknown_cost(monkeypatch):
    """The worker dies between sending and writing (here: the write fails): the call was
    opened in the ledger before it went out, so it is counted, its tokens and cost unknown,
    and its claim is released for a retry."""

    def write_fails(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(grading, "_grades_store", write_fails)
    with FakeLLM(responder=_pass) as llm:
        version = make_version(llm)
        trials = make_trials(["Paris", "Lyon"])
        with pytest.raises(RuntimeError, match="database gone"):
            judge_grade_trials(trials=trials, judge_version=version)
        bill = llm.requests
    spend = run_judge_spend(run_id=trials[0].run_id)
    assert (spend.calls, spend.unanswered, spend.input_unknown, spend.cost_unknown) == (
        bill,
        bill,
        bill,
        bill,
    )
    assert bill >= 1 and not Grade.objects.exists() and not JudgeClaim.objects.exists()


# --- pairwise --------------------------------------------------------------------------------


def test_a_pairwise_presentation_held_elsewhere_is_not_called_and_each_call_is_recorded():
    with FakeLLM(responder=lambda body: verdict_json("A")) as llm:
        version = make_version(llm, kind="pairwise", name="pref")
        base = make_trials(["x", "y"], run="base")
        head = make_trials(["x2", "y2"], run="head")
        pairs = [
            TrialPair.objects.create(case=b.case, trial_a=b, trial_b=h)
            for b, h in zip(base, head, strict=True)
        ]
        for pair in pairs:
            pair.refresh_from_db()
        other = holder_new()
        presentation_claims_take(
            presentations=[(pairs[0].id, "original")], judge_version_id=version.id, holder=other
        )
        pairs_judge(pairs=pairs, judge_version=version)
        assert llm.requests == 3  # the presentation another worker holds is its to call
        judge_claims_release(holder=other)
        pairs_judge(pairs=pairs, judge_version=version)
        pairs_judge(pairs=pairs, judge_version=version)  # a redelivery: nothing left
        assert llm.requests == 4
    verdicts = PairwiseVerdict.objects.all()
    assert verdicts.count() == 4
    stored = set(JudgeCallRecord.objects.filter(outcome="stored").values_list("nonce", flat=True))
    assert stored == set(verdicts.values_list("nonce", flat=True))
    assert JudgeCallRecord.objects.count() == 4
    assert set(JudgeCallRecord.objects.values_list("run_id", flat=True)) == {head[0].run_id}


# --- the judge rung: cancel between calls ----------------------------------------------------


def test_a_cancelled_run_stops_its_judge_rung_between_calls(monkeypatch):
    """One call at a time, 8 trials: the run is cancelled after the second call was sent;
    that call finishes and is recorded, no other call is made."""
    real = grading.run_live
    checks = []

    def cancelled_after_two_calls(**kwargs):
        checks.append(1)
        if len(checks) == 4:  # the chunk's first check, then one before each call
            run_cancel(run=Run.objects.get())
        return real(**kwargs)

    monkeypatch.setattr(grading, "run_live", cancelled_after_two_calls)
    with FakeLLM(responder=_pass) as llm:
        version = make_version(llm, concurrency=1)
        trials = make_trials([f"o{i}" for i in range(8)])
        run = _judged_run(trials, version)
        run_chunk_judge(run_id=run.id, trial_ids=[t.id for t in trials])
        bill = llm.requests
    assert (bill, Grade.objects.count(), JudgeCallRecord.objects.count()) == (2, 2, 2)
    assert Run.objects.get().status == Run.Status.CANCELLED
    assert not JudgeClaim.objects.exists()


# --- the sweeper's part ----------------------------------------------------------------------


def test_the_sweep_enqueues_expired_rung_claims_and_drops_those_of_a_cancelled_run(
    django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(claims.tasks.run_chunk_judge, "delay", lambda *a: sent.append(a))
    with FakeLLM() as llm:
        version = make_version(llm)
    live = make_trials(["a", "b"], run="live")
    gone = make_trials(["c"], run="gone")
    _judged_run(live, version)
    _judged_run(gone, version, status=Run.Status.CANCELLED)
    dead = holder_new()
    for trials in (live, gone):
        grade_claims_take(
            trial_ids=[t.id for t in trials],
            grader="judge",
            judge_version_id=version.id,
            holder=dead,
        )
    assert judge_claims_sweep() == claims.ClaimSweep()  # nothing expired yet
    _expire(dead)
    with django_capture_on_commit_callbacks(execute=True):
        swept = judge_claims_sweep()
    assert swept == claims.ClaimSweep(claims=3, tasks=1, dropped=1)
    assert sent == [(live[0].run_id, sorted(t.id for t in live))]
    assert JudgeClaim.objects.count() == 2  # taken over by the task, not deleted


def test_claims_of_concurrent_holders_never_overlap():
    """Eight holders claim overlapping halves of 40 keys: every key is held at most once."""
    with FakeLLM() as llm:
        version = make_version(llm)
    ids = [t.id for t in make_trials([f"o{i}" for i in range(40)])]
    held: list[set[int]] = []
    for k in range(8):
        chunk = ids[(k * 5) % 40 :] + ids[: (k * 5) % 40]
        held.append(
            grade_claims_take(
                trial_ids=chunk[:20], grader="j", judge_version_id=version.id, holder=holder_new()
            )
        )
    union = set().union(*held)
    assert sum(len(h) for h in held) == len(union) == JudgeClaim.objects.count()


# --- grades written before the ledger --------------------------------------------------------

LEDGER_MIGRATION = importlib.import_module("judges.migrations.0009_judge_claims_and_call_ledger")


def test_judge_grades_written_before_the_ledger_keep_their_spend():
    """The migration gives each older judge grade that made a call one ledger row with the
    tokens and cost it recorded; skipped rungs and refused templates made none."""
    with FakeLLM() as llm:
        version = make_version(llm)
    trials = make_trials(["a", "b", "c", "d"])
    call = {"nonce": "f" * 32, "input_tokens": 120, "output_tokens": 8, "attempts": 2}
    Grade.objects.create(
        trial=trials[0],
        grader="j",
        judge_version=version,
        passed=True,
        details={**call, "cost_usd": "0.0012", "price_source": "built-in"},
    )
    Grade.objects.create(
        trial=trials[1],
        grader="j",
        judge_version=version,
        status="error",
        passed=None,
        reason="rate_limited",
        details={"nonce": "e" * 32, "provider_message": "429", "cost_usd": None, "attempts": 4},
    )
    Grade.objects.create(
        trial=trials[2],
        grader="j",
        judge_version=version,
        status="not_judged",
        passed=None,
        details={"decided_by": "exact", "skipped": True},
    )
    Grade.objects.create(
        trial=trials[3],
        grader="j",
        judge_version=version,
        status="error",
        passed=None,
        reason="bad_template: ...",
        details={"error": "bad_template"},
    )
    LEDGER_MIGRATION.ledger_from_grades(apps, None)
    LEDGER_MIGRATION.ledger_from_grades(apps, None)  # run twice: one row per call
    rows = {r.nonce: r for r in JudgeCallRecord.objects.all()}
    assert set(rows) == {"f" * 32, "e" * 32}
    ok, failed = rows["f" * 32], rows["e" * 32]
    assert (ok.status, ok.outcome, ok.input_tokens, ok.attempts, str(ok.cost_usd)) == (
        "answered",
        "stored",
        120,
        2,
        "0.001200000000",
    )
    assert (failed.status, failed.cost_usd, failed.input_tokens) == ("failed", None, None)
    spend = run_judge_spend(run_id=trials[0].run_id)
    assert (spend.calls, spend.requests, spend.cost_unknown) == (2, 6, 1)
