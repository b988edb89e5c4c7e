"""evals.tasks: thin, idempotent under redelivery, enqueued only after commit."""

from __future__ import annotations

import pytest

from evals.models import Case, Grade, Run, Suite, Trial
from evals.runner.start import run_start
from evals.tasks import run_chunk_execute

pytestmark = pytest.mark.django_db

SIMULATED = {"kind": "simulated", "model": "simulated", "seed": 3, "error_probability": 0.0}
GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


def ten_cases() -> Suite:
    suite = Suite.objects.create(name="R1-suite")
    for i in range(1, 11):
        Case.objects.create(suite=suite, key=f"c{i}", input=f"q{i}", expected="m3")
    return suite


def test_run_chunk_execute_is_acks_late_and_rejects_on_worker_loss():
    assert run_chunk_execute.acks_late is True
    assert run_chunk_execute.reject_on_worker_lost is True


def test_the_chunk_task_is_not_sent_before_the_run_commits(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = run_start(
            suite=ten_cases(), name="R1", target=SIMULATED, graders=GRADERS, trials_per_case=1
        )
    # Nothing ran yet: every trial still queued until the transaction commits.
    assert Trial.objects.filter(run=run, status=Trial.Status.QUEUED).count() == 10
    assert len(callbacks) == 1
    callbacks[0]()
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == 10


def test_running_the_chunk_task_twice_leaves_ten_trials_not_eleven(
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(
            suite=ten_cases(), name="R1", target=SIMULATED, graders=GRADERS, trials_per_case=1
        )
    c7 = Trial.objects.get(run=run, case__key="c7", attempt=1)
    ids = list(Trial.objects.filter(run=run).values_list("id", flat=True))

    run_chunk_execute.apply(args=(run.id, [c7.id]))  # delivery d1 of (R1, c7, attempt 1)
    first = Trial.objects.get(id=c7.id)
    run_chunk_execute.apply(args=(run.id, [c7.id]))  # delivery d2: changes nothing
    run_chunk_execute.apply(args=(run.id, ids))
    run_chunk_execute.apply(args=(run.id, ids))
    run.refresh_from_db()

    again = Trial.objects.get(id=c7.id)
    assert (again.output, again.finished_at, again.status) == (
        first.output,
        first.finished_at,
        first.status,
    )
    assert Trial.objects.filter(run=run, case__key="c7", attempt=1).count() == 1
    assert Trial.objects.filter(run=run).count() == 10
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (10, 10, 0)
    assert Grade.objects.filter(trial__run=run).count() == 10
    assert run.status == Run.Status.SUCCEEDED


def test_a_chunk_task_for_a_deleted_run_does_nothing():
    run_chunk_execute.apply(args=(999_999, [1, 2, 3]))
    assert Trial.objects.count() == 0
