"""A run's queued trials written in one statement (evals.runner.queued_trials), and what
``run_start`` costs in queries: the same for 3 cases as for 300, whatever the chunk count
(issue 17, the command's start)."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core.models import OutboxMessage
from evals.models import Case, Run, Suite, Trial
from evals.runner.queued_trials import queued_trials_insert
from evals.runner.start import run_start, run_subject

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "says-yes", "kind": "contains", "config": {"value": "yes"}}]
TARGET = {"kind": "simulated", "model": "simulated", "seed": 1234}


def _suite(n: int, name: str = "s") -> Suite:
    suite = Suite.objects.create(name=name)
    Case.objects.bulk_create(
        Case(suite=suite, key=f"c{i:04d}", input=f"question {i}", content_hash=f"{i:064d}")
        for i in range(n)
    )
    return suite


def _run(suite: Suite, name: str = "r") -> Run:
    return Run.objects.create(suite=suite, name=name, target=TARGET, graders=GRADERS)


def test_it_writes_each_attempt_of_each_case_queued_as_the_orm_would():
    suite = _suite(3)
    run = _run(suite)
    case_ids = list(Case.objects.filter(suite=suite).values_list("id", flat=True))

    ids = queued_trials_insert(run_id=run.id, case_ids=case_ids, trials_per_case=2)

    trials = list(Trial.objects.filter(run=run).order_by("case_id", "attempt"))
    assert ids == [t.id for t in trials]  # (case id, attempt) order
    assert [(t.case_id, t.attempt) for t in trials] == [(c, n) for c in case_ids for n in (1, 2)]
    saved = Trial(run=run, case_id=case_ids[0], attempt=3)
    saved.save()
    saved.refresh_from_db()
    for trial in trials:
        assert trial.status == Trial.Status.QUEUED
        for name in ("output", "error_message", "raw_response", "request", "latency_ms",
                     "cost_usd", "started_at", "finished_at", "lease_expires_at", "top_up_id",
                     "top_up_round", "replaced_by_id", "trajectory", "final_state"):  # fmt: skip
            assert getattr(trial, name) == getattr(saved, name), name
        assert trial.created_at is not None and trial.created_at.tzinfo is not None


def test_each_trial_gets_its_own_random_version_4_uuid():
    suite = _suite(50)
    run = _run(suite)
    case_ids = list(Case.objects.filter(suite=suite).values_list("id", flat=True))

    queued_trials_insert(run_id=run.id, case_ids=case_ids, trials_per_case=5)

    uuids = list(Trial.objects.filter(run=run).values_list("uuid", flat=True))
    assert len(uuids) == 250 and len(set(uuids)) == 250  # five attempts of a case differ too
    assert all(isinstance(u, uuid.UUID) and u.version == 4 for u in uuids)
    assert all(u.variant == uuid.RFC_4122 for u in uuids)
    # found again by its UUID, as pages and the API look a trial up
    assert Trial.objects.get(uuid=uuids[7]).run_id == run.id


def test_an_existing_attempt_refuses_the_whole_statement():
    suite = _suite(2)
    run = _run(suite)
    case_ids = list(Case.objects.filter(suite=suite).values_list("id", flat=True))
    Trial.objects.create(run=run, case_id=case_ids[1], attempt=2)

    with pytest.raises(IntegrityError), transaction.atomic():
        queued_trials_insert(run_id=run.id, case_ids=case_ids, trials_per_case=2)
    assert Trial.objects.filter(run=run).count() == 1  # nothing of it was written


def test_no_cases_write_nothing_and_zero_attempts_are_refused():
    run = _run(_suite(1))
    assert queued_trials_insert(run_id=run.id, case_ids=[], trials_per_case=3) == []
    with pytest.raises(ValueError):
        queued_trials_insert(run_id=run.id, case_ids=[1], trials_per_case=0)
    assert not Trial.objects.filter(run=run).exists()


def _start_queries(suite: Suite, name: str) -> tuple[int, Run]:
    with CaptureQueriesContext(connection) as queries:
        run = run_start(suite=suite, name=name, target=TARGET, graders=GRADERS, trials_per_case=5)
    return len(queries), run


def test_starting_a_run_costs_the_same_queries_for_3_cases_as_for_300(
    settings, django_capture_on_commit_callbacks
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 4}
    with django_capture_on_commit_callbacks(execute=False):
        small, small_run = _start_queries(_suite(3, "small"), "a")
        large, large_run = _start_queries(_suite(300, "large"), "b")

    assert small == large
    assert Trial.objects.filter(run=large_run).count() == 1500
    # chunks of 16 (the simulated target's 16 calls in flight, above the setting's 4):
    # 1,500 trials are 94 messages, written by the same queries as the 15 trials' one
    assert OutboxMessage.objects.filter(subject=run_subject(large_run.id)).count() == 94
    assert OutboxMessage.objects.filter(subject=run_subject(small_run.id)).count() == 1


def test_a_chunk_holds_as_many_trials_as_the_target_has_calls_in_flight(
    settings, django_capture_on_commit_callbacks
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 4}
    suite = _suite(10)
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(
            suite=suite,
            name="wide",
            target={
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",  # never called: nothing is executed
                "model": "m",
                "prompt_template": "$input",
                "concurrency": 16,
            },
            graders=GRADERS,
            trials_per_case=5,
        )
    chunks = [
        args[1]
        for args in OutboxMessage.objects.filter(subject=run_subject(run.id))
        .order_by("id")
        .values_list("args", flat=True)
    ]
    assert [len(ids) for ids in chunks] == [16, 16, 16, 2]
    trials = list(Trial.objects.filter(run=run).order_by("case_id", "attempt"))
    assert [i for ids in chunks for i in ids] == [t.id for t in trials]
