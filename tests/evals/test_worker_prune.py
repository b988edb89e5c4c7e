"""Pruning old runs while a real Celery worker executes another run (``evals.prune``): the
worker's run ends exactly (every trial once, every grade once), the old runs are gone."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from evals.models import Grade, Run, RunPrune, Trial
from evals.prune import PruneReport, runs_prune
from evals.runner.start import run_start
from tests.evals.test_worker import (  # noqa: F401 (fixtures)
    GRADERS,
    WAIT_SECONDS,
    _run_wait,
    _suite,
    _worker_log,
    worker_factory,
    worker_queue,
)
from tests.fakellm import FakeLLM
from tests.report_builders import add_trial, make_run

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

# The endpoint answers one call at a time, 30 ms each, and holds every call after the
# 45th until the prune has ended: the worker writes trials while the prune deletes, and
# the live run cannot end before the prune does, however loaded the machine.
HELD_AFTER = 45


class GatedResponder:
    """A FakeLLM responder: a 30 ms answer, held from call ``HELD_AFTER`` until ``open``."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = threading.Event()

    def __call__(self, body: dict) -> str:
        self.calls += 1
        time.sleep(0.03)
        if self.calls > HELD_AFTER:
            self.gate.wait(timeout=WAIT_SECONDS)
        return "answer"


def _old_run(name: str) -> Run:
    """A finished run of 24 graded trials, finished 60 days ago."""
    run = make_run(cases=[(f"{name}-{i}", []) for i in range(8)], graders=GRADERS, name=name)
    for i in range(8):
        for attempt in (1, 2, 3):
            add_trial(run, f"{name}-{i}", attempt, grades={"nonempty": True})
    Run.objects.filter(id=run.id).update(finished_at=timezone.now() - timedelta(days=60))
    return run


def _prune_while_running(llm: FakeLLM, tmp_path) -> tuple[Run, int, PruneReport, int]:
    """Start the live run, wait for its first trials, prune; the OK trials before and after."""
    target = {
        "kind": "openai",
        "base_url": llm.base_url,
        "model": "fake-model",
        "prompt_template": "$input",
        "concurrency": 2,
    }
    live = run_start(
        suite=_suite(30), name="live", target=target, graders=GRADERS, trials_per_case=3
    )
    ok = Trial.objects.filter(run=live, status=Trial.Status.OK)
    deadline = time.monotonic() + WAIT_SECONDS
    while not ok.exists():
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.05)
    ok_before = ok.count()
    report = runs_prune(older_than=timedelta(days=30), batch_size=4, dry_run=False)
    return live, ok_before, report, ok.count()


def test_a_prune_in_batches_while_a_worker_runs_another_run(
    worker_factory,  # noqa: F811 - a fixture
    tmp_path,
    settings,
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 5}
    worker_factory()
    old = [_old_run(f"old{i}") for i in range(3)]

    responder = GatedResponder()
    with FakeLLM(responder=responder) as llm:
        try:
            live, ok_before, report, ok_after = _prune_while_running(llm, tmp_path)
        finally:
            responder.gate.set()
        live = _run_wait(live, tmp_path)

    assert sorted(r.name for r in report.runs) == ["old0", "old1", "old2"]
    assert report.trials == 72 and report.grades == 72
    assert report.batches >= 3 * (24 // 4)
    assert not Run.objects.filter(id__in=[r.id for r in old]).exists()
    assert RunPrune.objects.filter(finished_at__isnull=False).count() == 3
    assert ok_before > 0 and ok_after < 90  # the prune ran while the live run was executing
    assert live.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    assert (live.trials_total, live.trials_finished, live.trials_errored) == (90, 90, 0)
    assert Trial.objects.filter(run=live, status=Trial.Status.OK).count() == 90
    assert Grade.objects.filter(trial__run=live).count() == 90
    assert responder.calls == 90  # every trial called once
