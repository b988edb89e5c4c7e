"""Chunks that go on past their own trials (``evals.runner.execute.CHUNK_EXTEND_S``), through
real Celery workers and the shared mock LLM: one worker keeps the run's concurrency in flight
across chunk boundaries, and redelivery, a cancel and a worker killed while it holds other
chunks' trials still leave exactly the run's trials, each called once, graded once."""

from __future__ import annotations

import time

import pytest

from evals.models import Run, Trial
from evals.runner.finalize import run_cancel
from evals.tasks import run_chunk_execute
from tests.evals.test_worker import _run_wait, _worker_log, worker_factory, worker_queue
from tests.evals.worker_runs import (
    mock_calls,
    mock_run_start,
    ok_trials_wait,
    rescue_worker,
    run_assert_exact,
    run_sweep_wait,
    trials_settled_wait,
    worker_kill,
)
from tests.mockllm import mockllm

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

__all__ = ["mockllm", "worker_factory", "worker_queue"]  # fixtures, used by name


def _first_chunk(run: Run, size: int) -> set[int]:
    return set(Trial.objects.filter(run=run).order_by("id").values_list("id", flat=True)[:size])


def test_one_worker_keeps_the_runs_concurrency_across_chunks(
    worker_factory, mockllm, tmp_path, settings
):
    # Chunks of 3 trials, concurrency 8: a worker running one chunk at a time, each to its
    # end, never had more than 3 calls in flight.
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 3}
    mock = mockllm("--latency-ms", "150")
    worker_factory()
    run = mock_run_start(mock, name="wide", cases=20, trials=3, concurrency=8)
    run = _run_wait(run, tmp_path)

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    stats = mock.stats()
    assert stats["max_inflight"] == 8, stats
    run_assert_exact(run, trials=60, calls=mock_calls(mock))
    assert mock_calls(mock) == 60


def test_two_chunks_at_once_on_one_run_and_every_message_twice_call_each_trial_once(
    worker_factory, mockllm, tmp_path, settings
):
    # Two threads of one worker take chunks of the same run at once; both claim the run's
    # queued trials beyond their own, and every message is delivered a second time.
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 5}
    mock = mockllm("--latency-ms", "50")
    worker_factory(pool="threads", concurrency=2)
    run = mock_run_start(mock, name="twice", cases=30, trials=2, concurrency=6)
    ids = list(Trial.objects.filter(run=run).order_by("id").values_list("id", flat=True))
    for start in range(0, len(ids), 5):
        run_chunk_execute.delay(run.id, ids[start : start + 5])
    run = _run_wait(run, tmp_path)
    time.sleep(1.0)  # the duplicates finish too
    run.refresh_from_db()

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (60, 60, 0)
    run_assert_exact(run, trials=60, calls=mock_calls(mock))
    assert mock_calls(mock) == 60


def test_a_cancel_stops_a_chunk_holding_other_chunks_trials(
    worker_factory, mockllm, tmp_path, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 4}
    mock = mockllm("--latency-ms", "200")
    concurrency = 4
    worker_factory()
    run = mock_run_start(mock, name="cancel", cases=60, trials=2, concurrency=concurrency)
    first = _first_chunk(run, 4)
    ok_trials_wait(run, 12, tmp_path)
    # The first chunk's own 4 trials are long done: what runs now it took from the others.
    running = set(
        Trial.objects.filter(run=run, status=Trial.Status.RUNNING).values_list("id", flat=True)
    )
    assert running and not running & first

    run_cancel(run=run)
    at_cancel = mock_calls(mock)
    trials_settled_wait(run)
    time.sleep(0.5)  # a call started late would reach the mock by now

    calls = mock_calls(mock)
    assert calls - at_cancel <= 2 * concurrency, (at_cancel, calls)
    run_assert_exact(run, trials=120, calls=calls)
    cancelled = Trial.objects.filter(run=run, status=Trial.Status.CANCELLED).count()
    assert cancelled == 120 - calls and cancelled > 0
    run = _run_wait(run, tmp_path)
    assert run.status == Run.Status.CANCELLED and run.trials_finished == calls


def test_a_worker_killed_holding_other_chunks_trials_is_recovered_by_the_sweeper(
    worker_factory, worker_queue, mockllm, tmp_path, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 4}
    mock = mockllm("--latency-ms", "200")
    lease = {"ASSAY_TRIAL_LEASE_SECONDS": "2"}
    concurrency = 3
    victim = worker_factory(env=lease)
    with rescue_worker(worker_queue, tmp_path, lease) as rescue_queue:
        run = mock_run_start(mock, name="killed", cases=30, trials=1, concurrency=concurrency)
        first = _first_chunk(run, 4)
        ok_trials_wait(run, 8, tmp_path)
        lost = worker_kill(victim, run, mock)
        held = set(
            Trial.objects.filter(run=run, status=Trial.Status.RUNNING).values_list("id", flat=True)
        )
        # It died holding trials other messages carry (still waiting in its queue).
        assert held and not held & first
        run = run_sweep_wait(run, rescue_queue, tmp_path)

    # Paid and never recorded: only calls of trials it held (in flight, or answered and not
    # yet written when it died); nothing else is lost or doubled.
    assert 0 <= lost <= len(held)
    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    run_assert_exact(run, trials=30, calls=mock_calls(mock) - lost)
    assert mock_calls(mock) == 30 + lost
