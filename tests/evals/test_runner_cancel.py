"""A chunk stops starting calls once its run is cancelled between two of its writes: calls in
flight finish and are recorded, trials claimed but not called become cancelled, nothing
else is called (in-process; on a real worker: tests/evals/test_worker_faults.py)."""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command

import evals.runner.execute as execute_module
import evals.runner.start as start_module
from evals.models import Grade, Run, Trial
from evals.runner.execute import trial_chunk_execute
from evals.runner.finalize import run_cancel
from evals.runner.start import run_start
from tests.evals.test_worker import _suite
from tests.mockllm import mockllm

pytestmark = pytest.mark.django_db

__all__ = ["mockllm"]

CONCURRENCY = 4


def test_a_chunk_stops_calling_once_its_run_is_cancelled(mockllm, monkeypatch):
    mock = mockllm("--latency-ms", "100")
    held: list[list[int]] = []
    monkeypatch.setattr(start_module, "_chunks_enqueue", lambda run_id, chunks: held.extend(chunks))
    run = run_start(
        suite=_suite(40),
        name="stop",
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            "model": "mock-model",
            "prompt_template": "$input",
            "concurrency": CONCURRENCY,
        },
        graders=[{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}],
        trials_per_case=1,
    )
    record = execute_module.trial_results_record
    at_cancel = []

    def record_then_cancel(**kwargs):
        written = record(**kwargs)
        if not at_cancel and Trial.objects.filter(run=run, status="ok").count() >= 6:
            at_cancel.append(mock.stats()["requests"])
            run_cancel(run=Run.objects.get(id=run.id))
        return written

    monkeypatch.setattr(execute_module, "trial_results_record", record_then_cancel)
    trial_chunk_execute(run_id=run.id, trial_ids=held[0])

    calls = mock.stats()["requests"]
    recorded = Trial.objects.filter(run=run, status__in=Trial.FINISHED).count()
    assert calls == recorded  # the calls in flight at the cancel were recorded
    assert calls - at_cancel[0] <= 2 * CONCURRENCY  # and hardly any started after it
    assert Trial.objects.filter(run=run, status=Trial.Status.CANCELLED).count() == 40 - calls
    assert not Trial.objects.filter(run=run, status__in=["queued", "running"]).exists()
    assert Grade.objects.filter(trial__run=run).count() == recorded
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert run.trials_finished == calls


@pytest.mark.parametrize(
    ("fault", "backoff_base_s", "last"),
    [
        # every answer a 429 with Retry-After: 5 s; the back-off honours it
        (["--p429", "1", "--retry-after-s", "5"], 0.05, "rate_limited"),
        # every answer a 500 (no Retry-After): the back-off alone waits 5 to 10 s
        (["--p500", "1"], 10.0, "server_error 500"),
    ],
    ids=["429", "500"],
)
def test_a_cancel_stops_the_retries_of_calls_in_their_back_off(
    mockllm, monkeypatch, caplog, fault, backoff_base_s, last
):
    mock = mockllm("--latency-ms", "0", *fault)
    held: list[list[int]] = []
    monkeypatch.setattr(start_module, "_chunks_enqueue", lambda run_id, chunks: held.extend(chunks))
    run = run_start(
        suite=_suite(CONCURRENCY),
        name="stop-retries",
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            "model": "mock-model",
            "prompt_template": "$input",
            "concurrency": CONCURRENCY,
            "max_attempts": 3,
            "backoff_base_s": backoff_base_s,
            "backoff_max_s": 10.0,
        },
        graders=[{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}],
        trials_per_case=1,
    )
    stopped = execute_module._stopped
    at_cancel = []

    def cancel_once_every_call_failed(run_id, top_up_ids):
        # The first answer of every trial was a failure: each call now waits (5 s at least)
        # to retry.
        requests = mock.stats()["requests"]
        if not at_cancel and requests >= CONCURRENCY:
            at_cancel.append((requests, time.monotonic()))
            call_command("run_cancel", str(run.uuid), stdout=io.StringIO())
        return stopped(run_id, top_up_ids)

    monkeypatch.setattr(execute_module, "_stopped", cancel_once_every_call_failed)
    trial_chunk_execute(run_id=run.id, trial_ids=held[0])
    ended = time.monotonic()

    assert at_cancel, "the calls never failed"
    # No attempt after the cancel was seen; the back-off (5 s at least) was cut short.
    assert at_cancel[0][0] == CONCURRENCY
    assert mock.stats()["requests"] == CONCURRENCY
    assert ended - at_cancel[0][1] < 4.0
    trials = list(Trial.objects.filter(run=run))
    assert {t.status for t in trials} == {Trial.Status.CANCELLED}
    for t in trials:
        assert t.error_message.startswith(f"cancelled: stopped before attempt 2; last: {last}")
        assert t.cost_usd is None
    assert not Grade.objects.filter(trial__run=run).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert (run.trials_finished, run.trials_errored) == (0, 0)


def test_a_cancel_keeps_the_answer_of_an_attempt_in_flight_and_stops_the_rest(mockllm, monkeypatch):
    # Half the answers are 429s (Retry-After: 2 s), every answer takes 300 ms: at the cancel
    # some calls are in an attempt, some in their back-off.
    mock = mockllm("--latency-ms", "300", "--p429", "0.5", "--retry-after-s", "2")
    held: list[list[int]] = []
    monkeypatch.setattr(start_module, "_chunks_enqueue", lambda run_id, chunks: held.extend(chunks))
    n_cases = 3 * CONCURRENCY
    run = run_start(
        suite=_suite(n_cases),
        name="stop-mixed",
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            "model": "example-model-1.5",
            "prompt_template": "$input",
            "concurrency": CONCURRENCY,
            "max_attempts": 10,
            "backoff_base_s": 0.05,
        },
        graders=[{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}],
        trials_per_case=1,
    )
    stopped = execute_module._stopped
    at_cancel = []

    def cancel_once_some_failed(run_id, top_up_ids):
        stats = mock.stats()
        if not at_cancel and stats["status"].get("429", 0) >= 2 and stats["inflight"]:
            at_cancel.append(stats)
            run_cancel(run=Run.objects.get(id=run_id))
        return stopped(run_id, top_up_ids)

    monkeypatch.setattr(execute_module, "_stopped", cancel_once_some_failed)
    trial_chunk_execute(run_id=run.id, trial_ids=held[0])

    assert at_cancel, "no call failed while another was in flight"
    final = mock.stats()
    # Only the attempts in flight at the cancel were answered after it; none started.
    assert final["requests"] == at_cancel[0]["requests"]
    answered = final["status"].get("200", 0)
    ok = Trial.objects.filter(run=run, status=Trial.Status.OK)
    assert ok.count() == answered > 0  # every paid answer recorded once
    assert all(t.cost_usd is not None and t.cost_usd > 0 for t in ok)
    assert not Trial.objects.filter(run=run, status__in=["queued", "running", "error"]).exists()
    assert Trial.objects.filter(
        run=run, status=Trial.Status.CANCELLED, error_message__startswith="cancelled: stopped"
    ).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.trials_finished == answered
