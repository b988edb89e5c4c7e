"""The sweeper takes back trials a dead worker held and stalled judge rungs, and nothing else.

The endpoint is the local fake LLM server (tests/fakellm.py); Celery runs eagerly, so an
enqueued chunk executes inside the sweep."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from core.models import OutboxMessage
from evals.models import Grade, Run, Trial
from evals.runner.start import run_start
from evals.runner.sweeper import SweepResult, runs_sweep
from evals.tasks import runs_sweep as runs_sweep_task
from tests.judge_builders import make_version
from tests.judges import test_judge_ladder as ladder
from tests.judges.test_judge_ladder import SAYS_YES, judge_spec, suite

pytestmark = pytest.mark.django_db


judge = ladder.judge  # the scripted judge and the fake LLM server, as pytest fixtures
llm = ladder.llm


def _queued_run(capture, llm, graders, answers) -> Run:
    """A run whose chunk messages were never delivered (the capture drops them)."""
    with capture(execute=False):
        return run_start(
            suite=suite(answers), name="r", target=llm.target(), graders=graders, trials_per_case=1
        )


def test_it_takes_back_trials_whose_lease_expired_with_their_queued_run_mates_and_leaves_live_ones(
    llm, django_capture_on_commit_callbacks
):
    run = _queued_run(
        django_capture_on_commit_callbacks, llm, [SAYS_YES], {f"c{i}": "yes" for i in range(4)}
    )
    trials = list(run.trials.order_by("id"))
    now = timezone.now()
    # A worker died holding trials 0-1 (its chunk had not claimed trial 3 yet); a live one
    # holds trial 2.
    Trial.objects.filter(id__in=[t.id for t in trials[:2]]).update(
        status=Trial.Status.RUNNING, lease_expires_at=now - timedelta(seconds=1)
    )
    Trial.objects.filter(id=trials[2].id).update(
        status=Trial.Status.RUNNING, lease_expires_at=now + timedelta(hours=1)
    )
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)

    with django_capture_on_commit_callbacks(execute=True):  # the chunk message goes out
        result = runs_sweep()

    assert result == SweepResult(runs=1, trials=3, chunks=1)
    statuses = dict(Trial.objects.filter(run=run).values_list("id", "status"))
    assert [statuses[t.id] for t in trials] == ["ok", "ok", "running", "ok"]
    assert Grade.objects.filter(trial__run=run).count() == 3
    assert llm.requests == 3
    assert runs_sweep() == SweepResult()  # nothing stale any more: a no-op
    assert llm.requests == 3


def test_it_takes_back_the_queued_trials_of_a_run_idle_for_a_lease(
    llm, django_capture_on_commit_callbacks
):
    """The chunk message was sent, then lost with the broker (or its worker died before it
    claimed anything): nothing happens on the run for a lease, so the sweeper sends its
    queued trials again."""
    run = _queued_run(django_capture_on_commit_callbacks, llm, [SAYS_YES], {"c1": "yes"})
    OutboxMessage.objects.update(sent_at=timezone.now())  # sent, then lost

    assert runs_sweep() == SweepResult()  # written a moment ago: a worker may be on its way
    with django_capture_on_commit_callbacks(execute=True):
        result = runs_sweep(now=timezone.now() + timedelta(hours=1))

    assert result == SweepResult(runs=1, trials=1, chunks=1)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and llm.requests == 1


def test_it_sends_again_a_chunk_message_the_broker_refused(llm, django_capture_on_commit_callbacks):
    run = _queued_run(django_capture_on_commit_callbacks, llm, [SAYS_YES], {"c1": "yes"})
    later = timezone.now() + timedelta(minutes=1)
    with django_capture_on_commit_callbacks(execute=True):
        result = runs_sweep(now=later)
    assert result == SweepResult(messages=1)  # the message itself; no orphan yet
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and llm.requests == 1


def test_it_ignores_finished_and_cancelled_runs(llm, django_capture_on_commit_callbacks):
    run = _queued_run(django_capture_on_commit_callbacks, llm, [SAYS_YES], {"c1": "yes"})
    Trial.objects.filter(run=run).update(
        status=Trial.Status.RUNNING, lease_expires_at=timezone.now() - timedelta(hours=1)
    )
    Run.objects.filter(id=run.id).update(status=Run.Status.CANCELLED)
    assert runs_sweep() == SweepResult()
    assert llm.requests == 0


def test_it_enqueues_a_stalled_judge_rung_once_a_lease_has_passed(
    llm, judge, django_capture_on_commit_callbacks, monkeypatch
):
    version = make_version(llm)
    enqueued: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        "evals.runner.execute._judge_chunk_enqueue",
        lambda run_id, ids: enqueued.append((run_id, ids)),
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(
            suite=suite({"c1": "yes", "c2": "yes"}),
            name="r",
            target=llm.target(),
            graders=[SAYS_YES, judge_spec(version)],
            trials_per_case=1,
        )
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and judge.calls == 0  # the judge task was lost
    enqueued.clear()

    assert runs_sweep() == SweepResult()  # quiet for less than a lease: not stalled yet
    monkeypatch.undo()
    later = timezone.now() + timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        result = runs_sweep(now=later)

    assert result == SweepResult(judge_runs=1, judge_chunks=1)
    run.refresh_from_db()
    assert judge.calls == 2 and run.status == Run.Status.SUCCEEDED
    assert runs_sweep(now=later) == SweepResult()


def test_the_task_and_the_command_run_one_sweep(llm, django_capture_on_commit_callbacks):
    run = _queued_run(django_capture_on_commit_callbacks, llm, [SAYS_YES], {"c1": "yes"})
    Trial.objects.filter(run=run).update(
        status=Trial.Status.RUNNING, lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert runs_sweep_task.delay().get()["trials"] == 1
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    out = io.StringIO()
    call_command("runs_sweep", stdout=out)
    assert (
        out.getvalue().strip() == "0 trials taken back in 0 chunks (0 runs); 0 judge chunks "
        "enqueued again (0 runs); 0 task messages sent again"
    )


def test_a_dead_chunk_gets_its_target_and_judge_rungs_back_in_one_sweep(
    llm, judge, django_capture_on_commit_callbacks, monkeypatch
):
    """A worker wrote two trials, held a third, and died: its chunk never reached the end
    where it enqueues the judge rung. One sweep takes back the third trial and sends the
    first two to the judge, without waiting another lease."""
    version = make_version(llm)
    monkeypatch.setattr("evals.runner.execute._judge_chunk_enqueue", lambda run_id, ids: None)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(
            suite=suite({"c1": "yes", "c2": "yes", "c3": "yes"}),
            name="r",
            target=llm.target(),
            graders=[SAYS_YES, judge_spec(version)],
            trials_per_case=1,
        )
    monkeypatch.undo()
    written, held = list(run.trials.order_by("id"))[:2], run.trials.order_by("id").last()
    now = timezone.now()
    Trial.objects.filter(id__in=[t.id for t in written]).update(
        finished_at=now - timedelta(seconds=30)
    )
    Trial.objects.filter(id=held.id).update(
        status=Trial.Status.RUNNING, lease_expires_at=now - timedelta(seconds=1)
    )
    assert judge.calls == 0

    with django_capture_on_commit_callbacks(execute=True):
        result = runs_sweep()

    assert result == SweepResult(runs=1, trials=1, chunks=1, judge_runs=1, judge_chunks=1)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert Grade.objects.filter(trial__run=run, grader="judge").count() == 3
    assert judge.calls == 3  # each trial judged once
