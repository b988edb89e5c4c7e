"""A chunk that loses its database connection mid-way (PostgreSQL: ``pg_terminate_backend``
from another connection) stops starting calls, reconnects, records the calls it paid for,
gives back the trials it had not called and enqueues them again; it does not finish the
batch blind. Afterwards the run has exactly its trials and grades, and the mock's call count
equals the trials recorded: no call was made twice or thrown away."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

import evals.runner.execute as execute_module
import evals.runner.start as start_module
from evals.models import Grade, Run, Trial
from evals.runner.execute import trial_chunk_execute
from evals.runner.start import run_start
from tests.evals.test_worker import _suite
from tests.mockllm import mockllm

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

__all__ = ["mockllm"]

GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


def _terminate(pid: int) -> None:
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_chunk_that_loses_its_database_stops_calling_and_retries_the_rest(mockllm, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's: SQLite has no connection to lose")
    mock = mockllm("--latency-ms", "100")
    held: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(start_module, "_chunks_enqueue", lambda run_id, chunks: held.extend(chunks))
    run = run_start(
        suite=_suite(40),
        name="blip",
        target={
            "kind": "openai",
            "base_url": mock.base_url,
            "model": "mock-model",
            "prompt_template": "$input",
            "concurrency": 4,
        },
        graders=GRADERS,
        trials_per_case=1,
    )
    (trial_ids,) = held
    held.clear()
    monkeypatch.setattr(
        execute_module, "_chunks_enqueue", lambda run_id, chunks: held.extend(chunks)
    )

    record = execute_module.trial_results_record
    writes = []

    def record_then_lose(**kwargs):
        writes.append(len(kwargs["results"]))
        if len(writes) == 3:  # the third write finds its connection gone
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                _terminate(cursor.fetchone()[0])
        return record(**kwargs)

    monkeypatch.setattr(execute_module, "trial_results_record", record_then_lose)
    trial_chunk_execute(run_id=run.id, trial_ids=trial_ids)

    calls = mock.stats()["requests"]
    ok = Trial.objects.filter(run=run, status=Trial.Status.OK)
    queued = sorted(
        Trial.objects.filter(run=run, status=Trial.Status.QUEUED).values_list("id", flat=True)
    )
    assert 0 < calls < 40  # it stopped: the batch was not finished blind
    assert ok.count() == calls  # every call paid for is recorded, in flight ones too
    assert not Trial.objects.filter(run=run, status=Trial.Status.RUNNING).exists()
    assert held == [queued] and len(queued) == 40 - calls  # the rest, enqueued again
    assert Grade.objects.filter(trial__run=run).count() == calls

    monkeypatch.setattr(execute_module, "trial_results_record", record)
    trial_chunk_execute(run_id=run.id, trial_ids=held[0])  # the retry, once reconnected

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert Trial.objects.filter(run=run).count() == 40
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == 40
    assert Grade.objects.filter(trial__run=run).count() == 40
    assert mock.stats()["requests"] == 40
    assert run.trials_finished == 40
