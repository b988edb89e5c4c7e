"""A chunk stops starting calls once its run is cancelled between two of its writes: calls in
flight finish and are recorded, trials claimed but not called become cancelled, nothing
else is called (in-process; on a real worker: tests/evals/test_worker_faults.py)."""

from __future__ import annotations

import pytest

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
