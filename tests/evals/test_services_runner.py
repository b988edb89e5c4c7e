"""The runner services: start, chunk execution, grading, finalize, cancel.

The outside world (the LLM endpoint) is a real local server, tests/fakellm.py, scripted by
markers in each case's input; everything else is the real code on the test database.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.errors import DomainError
from core.models import OutboxMessage
from evals.grading.grader_config import parse_grader_specs
from evals.grading.ladder import _case_input, trial_grade
from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from evals.run_status import run_count_summary, run_trial_count
from evals.runner import execute
from evals.runner.calls import CallPool
from evals.runner.claims import trials_claim, trials_claim_next
from evals.runner.execute import trial_chunk_execute, trial_results_record
from evals.runner.finalize import run_cancel, run_finalize
from evals.runner.start import run_start, run_subject
from evals.tasks import run_chunk_execute
from providers.models import ModelPrice
from tests.fakellm import FakeLLM
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "says-yes", "kind": "regex", "config": {"pattern": "^yes$"}}]


@pytest.fixture
def llm():
    server = FakeLLM(retry_after="0", hang_s=5.0)
    server.start()
    yield server
    server.stop()


def openai_target(llm: FakeLLM, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": llm.base_url,
        "model": "fake-model",
        "prompt_template": "$input",
        "max_attempts": 2,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 0.5,
        "concurrency": 8,
        **extra,
    }


def make_suite(inputs: dict[str, str], name: str = "s") -> Suite:
    suite = Suite.objects.create(name=name)
    for key, text in inputs.items():
        Case.objects.create(suite=suite, key=key, input=text, expected="yes")
    return suite


def start_and_execute(django_capture_on_commit_callbacks, **kwargs) -> Run:
    """run_start, then the on-commit enqueue (Celery is eager in tests), then reload."""
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(**kwargs)
    run.refresh_from_db()
    return run


def ten_case_suite() -> Suite:
    return make_suite({f"c{i}": f"[answer=yes] question {i}" for i in range(1, 11)}, name="ten")


# -- run_start -----------------------------------------------------------------------------


def test_it_creates_one_queued_trial_per_active_case_and_attempt(
    llm, django_capture_on_commit_callbacks, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 4}
    suite = make_suite({"a": "[answer=yes] a", "b": "[answer=yes] b", "c": "[answer=yes] c"})
    Case.objects.filter(key="c").update(retired_at=timezone.now())

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = run_start(
            suite=suite, name="r", target=openai_target(llm), graders=GRADERS, trials_per_case=3
        )

    assert run.status == Run.Status.QUEUED
    assert run.trials_total == 6
    assert run.target_kind == "openai" and run.model == "fake-model"
    assert run.target == openai_target(llm) and run.graders == GRADERS
    rows = sorted(Trial.objects.filter(run=run).values_list("case__key", "attempt", "status"))
    assert rows == [(k, n, "queued") for k in ("a", "b") for n in (1, 2, 3)]
    # one chunk message (chunks of 8: the target's concurrency, above the setting's 4),
    # written in the transaction, sent after commit by one hook
    assert OutboxMessage.objects.filter(subject=run_subject(run.id)).count() == 1
    assert len(callbacks) == 1


def test_it_enqueues_the_chunk_tasks_only_after_commit(
    llm, django_capture_on_commit_callbacks, monkeypatch, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 4}
    sent: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(run_chunk_execute, "delay", lambda run_id, ids: sent.append((run_id, ids)))
    suite = ten_case_suite()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = run_start(
            suite=suite,
            name="r",
            target=openai_target(llm, concurrency=4),
            graders=GRADERS,
            trials_per_case=1,
        )
    assert sent == []
    for callback in callbacks:
        callback()

    all_ids = sorted(Trial.objects.filter(run=run).values_list("id", flat=True))
    assert [len(ids) for _, ids in sent] == [4, 4, 2]
    assert {run_id for run_id, _ in sent} == {run.id}
    assert sorted(i for _, ids in sent for i in ids) == all_ids


@pytest.mark.parametrize(
    ("target", "graders", "error", "field"),
    [
        ({"kind": "nope"}, [], DomainError, "target.kind"),
        (
            {"kind": "openai", "model": "m", "prompt_template": "$input"},
            [],
            DomainError,
            "target.base_url",
        ),
        (None, [{"key": "g", "kind": "no-such-grader"}], DomainError, "graders[0].kind"),
    ],
)
def test_it_refuses_a_bad_configuration_before_writing_anything(llm, target, graders, error, field):
    suite = ten_case_suite()
    with pytest.raises(error, match=field.replace("[", r"\[").replace("]", r"\]")):
        run_start(
            suite=suite,
            name="r",
            target=target or openai_target(llm),
            graders=graders,
            trials_per_case=1,
        )
    assert Run.objects.count() == 0 and Trial.objects.count() == 0


@pytest.mark.parametrize("trials", [0, -1, 51])
def test_it_refuses_fewer_than_one_trial_per_case(llm, trials):
    with pytest.raises(DomainError, match="trials_per_case"):
        run_start(
            suite=ten_case_suite(),
            name="r",
            target=openai_target(llm),
            graders=GRADERS,
            trials_per_case=trials,
        )


def test_it_refuses_a_suite_without_active_cases(llm):
    suite = make_suite({"a": "x"})
    Case.objects.update(retired_at=timezone.now())
    with pytest.raises(DomainError, match="suite"):
        run_start(
            suite=suite, name="r", target=openai_target(llm), graders=GRADERS, trials_per_case=1
        )


# -- execution ---------------------------------------------------------------------------


def test_it_runs_a_suite_to_success_and_grades_every_trial(llm, django_capture_on_commit_callbacks):
    suite = make_suite({"y1": "[answer=yes] 1", "y2": "[answer=yes] 2", "n1": "[answer=no] 3"})
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=2,
    )

    assert run.status == Run.Status.SUCCEEDED
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (6, 6, 0)
    assert run.error_message == ""
    assert run.started_at is not None and run.finished_at >= run.started_at
    assert Grade.objects.filter(trial__run=run, passed=True).count() == 4
    assert Grade.objects.filter(trial__run=run, passed=False).count() == 2
    trial = Trial.objects.filter(run=run, case__key="y1").first()
    assert trial.output == "yes"
    assert trial.input_tokens > 0 and trial.output_tokens > 0 and trial.latency_ms > 0
    assert trial.lease_expires_at is None and trial.finished_at is not None


def test_a_run_whose_cases_hit_provider_faults_ends_failed_with_exact_counts(
    llm, django_capture_on_commit_callbacks
):
    inputs = {f"ok{i}": f"[answer=yes] fine {i}" for i in range(4)}
    inputs["wrong"] = "[answer=no] wrong"
    inputs |= {
        "rate": "[fault=429] limited",
        "boom": "[fault=500] broken",
        "slow": "[fault=timeout] hangs",
        "param": "[fault=400-temperature] refused",
    }
    suite = make_suite(inputs)

    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=2,
    )

    assert run.status == Run.Status.FAILED
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (18, 18, 8)
    assert run.error_message == "8 of 18 trials errored"
    errored = Trial.objects.filter(run=run, status=Trial.Status.ERROR)
    assert sorted(set(errored.values_list("case__key", flat=True))) == [
        "boom",
        "param",
        "rate",
        "slow",
    ]
    assert all(t.error_message for t in errored)
    assert "temperature" in errored.get(case__key="param", attempt=1).error_message
    # An errored trial is errored, not failed: it has no grade at all, let alone a pass.
    assert not Grade.objects.filter(trial__in=errored).exists()
    assert Grade.objects.filter(trial__run=run, passed=True).count() == 8
    assert Grade.objects.filter(trial__run=run, passed=False).count() == 2


def test_it_never_calls_success_a_run_where_every_trial_errored(
    llm, django_capture_on_commit_callbacks
):
    suite = make_suite({"a": "[fault=503] a", "b": "[fault=503] b"})
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=1,
    )
    assert run.status == Run.Status.FAILED
    assert run.error_message == "2 of 2 trials errored"
    assert not Grade.objects.exists()


def test_it_writes_each_trial_as_it_completes_not_when_the_chunk_ends(
    llm, django_capture_on_commit_callbacks
):
    suite = make_suite({"fast": "[answer=yes] fast", "slow": "[latency=1200][answer=yes] slow"})
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r",
        target=openai_target(llm, timeout_s=5.0),
        graders=GRADERS,
        trials_per_case=1,
    )
    fast = Trial.objects.get(run=run, case__key="fast")
    slow = Trial.objects.get(run=run, case__key="slow")
    assert slow.finished_at - fast.finished_at > timedelta(seconds=0.8)


def test_it_records_null_cost_for_an_unpriced_model_and_exact_cost_for_a_priced_one(
    llm, django_capture_on_commit_callbacks
):
    suite = make_suite({"a": "[answer=yes] a"})
    unpriced = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r1",
        target=openai_target(llm, model="unpriced-model-x"),
        graders=GRADERS,
        trials_per_case=1,
    )
    ModelPrice.objects.create(
        model="priced-model-x",
        input_usd_per_mtok=Decimal("0.70"),
        output_usd_per_mtok=Decimal("2.10"),
    )
    priced = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r2",
        target=openai_target(llm, model="priced-model-x"),
        graders=GRADERS,
        trials_per_case=1,
    )

    assert unpriced.trials.get().cost_usd is None
    trial = priced.trials.get()
    expected = (
        Decimal(trial.input_tokens) * Decimal("0.70")
        + Decimal(trial.output_tokens) * Decimal("2.10")
    ) / Decimal(1_000_000)
    assert trial.cost_usd == expected.quantize(Decimal("0.00000001"))


# -- idempotency (fault F1) ----------------------------------------------------------------


def test_a_redelivered_chunk_adds_no_trial_no_grade_and_no_call(
    llm, django_capture_on_commit_callbacks
):
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=ten_case_suite(),
        name="R1",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=1,
    )
    calls_before = llm.requests
    trial_ids = list(Trial.objects.filter(run=run).values_list("id", flat=True))

    run_chunk_execute.apply(args=(run.id, trial_ids))  # the same message, delivered again
    trial_chunk_execute(run_id=run.id, trial_ids=trial_ids)
    run.refresh_from_db()

    assert Trial.objects.filter(run=run).count() == 10
    assert Trial.objects.filter(run=run, case__key="c7", attempt=1).count() == 1
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (10, 10, 0)
    assert Grade.objects.filter(trial__run=run).count() == 10
    assert llm.requests == calls_before == 10
    assert run.status == Run.Status.SUCCEEDED


def test_it_takes_over_trials_whose_lease_expired_but_not_live_ones(
    llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(
            suite=ten_case_suite(),
            name="R1",
            target=openai_target(llm),
            graders=GRADERS,
            trials_per_case=1,
        )
    trials = list(Trial.objects.filter(run=run).order_by("id"))
    past, future = timezone.now() - timedelta(seconds=1), timezone.now() + timedelta(hours=1)
    # A worker died holding trials 0-2; another one is alive and holds trial 3.
    Trial.objects.filter(id__in=[t.id for t in trials[:3]]).update(
        status=Trial.Status.RUNNING, lease_expires_at=past
    )
    Trial.objects.filter(id=trials[3].id).update(
        status=Trial.Status.RUNNING, lease_expires_at=future
    )

    trial_chunk_execute(run_id=run.id, trial_ids=[t.id for t in trials])
    run.refresh_from_db()

    assert Trial.objects.get(id=trials[3].id).status == Trial.Status.RUNNING
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == 9
    assert run.status == Run.Status.RUNNING and run.trials_finished == 9
    assert llm.requests == 9


# -- a chunk goes on with its run's queued trials (CHUNK_EXTEND_S) -------------------------


def _started_unsent(
    llm, capture, monkeypatch, settings, *, chunk: int, suite: str = "ten"
) -> tuple[Run, list]:
    """A ten-trial run (calls of 100 ms) started with chunks of ``chunk``; returns it and
    its chunk messages' trial ids, not executed."""
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": chunk}
    sent: list[list[int]] = []
    monkeypatch.setattr(run_chunk_execute, "delay", lambda run_id, ids: sent.append(ids))
    with capture(execute=True):
        run = run_start(
            suite=make_suite(
                {f"c{i}": f"[answer=yes] question {i}" for i in range(1, 11)}, name=suite
            ),
            name="R1",
            # chunks of ``chunk``: a chunk holds at least the target's concurrency
            target=openai_target(llm, prompt_template="[latency=100] $input", concurrency=chunk),
            graders=GRADERS,
            trials_per_case=1,
        )
    return run, sent


def testtrials_claim_next_takes_queued_trials_of_the_run_lowest_id_first(
    llm, django_capture_on_commit_callbacks, monkeypatch, settings
):
    run, _ = _started_unsent(
        llm, django_capture_on_commit_callbacks, monkeypatch, settings, chunk=4
    )
    ids = sorted(Trial.objects.filter(run=run).values_list("id", flat=True))
    Trial.objects.filter(id=ids[1]).update(status=Trial.Status.RUNNING)  # held elsewhere
    other, _ = _started_unsent(
        llm, django_capture_on_commit_callbacks, monkeypatch, settings, chunk=4, suite="other"
    )  # its trials are never taken for ``run``

    assert trials_claim_next(run_id=run.id, limit=0) == []
    assert trials_claim_next(run_id=run.id, limit=3) == [ids[0], ids[2], ids[3]]
    assert trials_claim_next(run_id=run.id, limit=100) == ids[4:]
    assert trials_claim_next(run_id=run.id, limit=100) == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert not Trial.objects.filter(run=run, status=Trial.Status.QUEUED).exists()
    assert Trial.objects.filter(run=run, lease_expires_at__isnull=True).count() == 1  # ids[1]
    assert Trial.objects.filter(run=other, status=Trial.Status.QUEUED).count() == 10


def test_one_chunk_runs_its_whole_run_and_the_other_messages_call_nothing(
    llm, django_capture_on_commit_callbacks, monkeypatch, settings
):
    run, sent = _started_unsent(
        llm, django_capture_on_commit_callbacks, monkeypatch, settings, chunk=4
    )
    assert [len(ids) for ids in sent] == [4, 4, 2]
    pools: list[dict] = []
    monkeypatch.setattr(
        execute, "CallPool", lambda config: pools.append(config) or CallPool(config)
    )

    trial_chunk_execute(run_id=run.id, trial_ids=sent[0])
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.trials_finished == 10
    assert llm.requests == 10  # its own 4 and the 6 the other messages carry

    for ids in sent[1:]:  # delivered afterwards: nothing to call, no target client built
        trial_chunk_execute(run_id=run.id, trial_ids=ids)
    run.refresh_from_db()
    assert len(pools) == 1 and llm.requests == 10
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (10, 10, 0)
    assert Grade.objects.filter(trial__run=run).count() == 10
    assert run.status == Run.Status.SUCCEEDED


def test_a_later_message_makes_up_a_grade_lost_between_write_and_grade(
    llm, django_capture_on_commit_callbacks, monkeypatch, settings
):
    run, sent = _started_unsent(
        llm, django_capture_on_commit_callbacks, monkeypatch, settings, chunk=4
    )
    trial_chunk_execute(run_id=run.id, trial_ids=sent[0])  # runs all ten
    # A worker died between writing a trial and grading it: its grade is missing.
    lost = sent[1][2]
    Grade.objects.filter(trial_id=lost).delete()

    trial_chunk_execute(run_id=run.id, trial_ids=sent[1])

    assert list(Grade.objects.filter(trial_id=lost).values_list("grader", "passed")) == [
        ("says-yes", True)
    ]
    assert Grade.objects.filter(trial__run=run).count() == 10
    assert llm.requests == 10


def test_a_message_whose_trials_another_chunk_ran_only_reads_seven_times(
    llm, django_capture_on_commit_callbacks, monkeypatch, settings
):
    """~100 such messages per 10,000-trial run: each one reads the run, whether it has
    work, whether a grade is missing, and (the run closed with these counts) its counts
    and top-ups; no write, whatever the chunk's size."""
    run, sent = _started_unsent(
        llm, django_capture_on_commit_callbacks, monkeypatch, settings, chunk=4
    )
    trial_chunk_execute(run_id=run.id, trial_ids=sent[0])

    for ids in sent[1:]:
        with CaptureQueriesContext(connection) as queries:
            trial_chunk_execute(run_id=run.id, trial_ids=ids)
        statements = [q["sql"].lstrip().split()[0].upper() for q in queries.captured_queries]
        assert statements == ["SELECT"] * 7
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.trials_finished == 10


def test_with_no_extension_a_chunk_calls_only_its_own_trials(
    llm, django_capture_on_commit_callbacks, monkeypatch, settings
):
    run, sent = _started_unsent(
        llm, django_capture_on_commit_callbacks, monkeypatch, settings, chunk=4
    )
    monkeypatch.setattr(execute, "CHUNK_EXTEND_S", 0.0)

    trial_chunk_execute(run_id=run.id, trial_ids=sent[0])
    assert llm.requests == 4
    assert set(
        Trial.objects.filter(run=run, status=Trial.Status.OK).values_list("id", flat=True)
    ) == set(sent[0])


def test_grading_a_trial_twice_keeps_one_grade_per_grader(llm, django_capture_on_commit_callbacks):
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=make_suite({"a": "[answer=yes] a"}),
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=1,
    )
    trial = run.trials.get()
    specs = parse_grader_specs(
        GRADERS + [{"key": "short", "kind": "regex", "config": {"pattern": "^.{1,5}$"}}]
    )

    assert trial_grade(trial=trial, specs=specs) == 1  # only the new grader
    assert trial_grade(trial=trial, specs=specs) == 0
    assert sorted(trial.grades.values_list("grader", "passed")) == [
        ("says-yes", True),
        ("short", True),
    ]


def test_an_errored_trial_gets_no_grades(llm, django_capture_on_commit_callbacks):
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=make_suite({"a": "[fault=500] a"}),
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=1,
    )
    trial = run.trials.get()
    assert trial.status == Trial.Status.ERROR
    assert trial_grade(trial=trial, specs=parse_grader_specs(GRADERS)) == 0
    assert not trial.grades.exists()


def test_finalize_is_idempotent(llm, django_capture_on_commit_callbacks):
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=make_suite({"a": "[fault=500] a", "b": "[answer=yes] b"}),
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=1,
    )
    first = (
        run.status,
        run.finished_at,
        run.trials_finished,
        run.trials_errored,
        run.error_message,
    )
    again = run_finalize(run_id=run.id)
    assert (
        (
            again.status,
            again.finished_at,
            again.trials_finished,
            again.trials_errored,
            again.error_message,
        )
        == first
        == (Run.Status.FAILED, run.finished_at, 2, 1, "1 of 2 trials errored")
    )


# -- cancel ------------------------------------------------------------------------------


def test_a_cancelled_run_executes_nothing_and_stays_cancelled(
    llm, django_capture_on_commit_callbacks, carol
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = run_start(
            suite=ten_case_suite(),
            name="r",
            target=openai_target(llm),
            graders=GRADERS,
            trials_per_case=2,
        )
    assert run_cancel(run=run, by=carol) is True
    for callback in callbacks:
        callback()  # the chunk tasks still arrive
    run.refresh_from_db()

    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert Trial.objects.filter(run=run, status=Trial.Status.CANCELLED).count() == 20
    assert llm.requests == 0
    assert run_cancel(run=run, by=carol) is False


def test_running_trials_finish_after_cancel_but_the_run_stays_cancelled(
    llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(
            suite=ten_case_suite(),
            name="r",
            target=openai_target(llm),
            graders=GRADERS,
            trials_per_case=1,
        )
    trial_ids = list(Trial.objects.filter(run=run).order_by("id").values_list("id", flat=True))
    # A worker is mid-chunk on the first three trials when the run is cancelled.

    assert trials_claim(run_id=run.id, trial_ids=trial_ids[:3]) == trial_ids[:3]
    run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.finished_at is None
    assert (run.trials_finished, run.trials_cancelled) == (0, 7)  # counted as they cancel
    assert run_count_summary(run) == (
        "0 of 10 trials finished, 7 cancelled, 3 in flight when it was cancelled "
        "(recorded as they end)"
    )

    trials = Trial.objects.filter(id__in=trial_ids[:3]).select_related("case")
    with CallPool(run.target) as pool:
        pool.submit([(t.id, _case_input(t)) for t in trials])
        results = pool.close()
    for trial_id, result in results:
        trial_results_record(run_id=run.id, model=run.model, results=[(trial_id, result)])
    run = run_finalize(run_id=run.id)

    assert run.status == Run.Status.CANCELLED and run.finished_at is not None
    assert Trial.objects.filter(run=run, status=Trial.Status.OK).count() == 3
    assert Trial.objects.filter(run=run, status=Trial.Status.CANCELLED).count() == 7
    assert (run.trials_finished, run.trials_cancelled, run.trials_total) == (3, 7, 10)
    assert run_trial_count(run).summary == "3 of 10 trials finished, 7 cancelled"
    assert run_count_summary(run) == "3 of 10 trials finished, 7 cancelled"


def test_a_cancelled_run_counts_its_errored_trials_of_the_finished_never_the_cancelled():
    """ "N of M trials errored": M is the finished trials (ok + errored), never the cancelled
    ones, which are counted apart (evals.run_status)."""
    run = make_run(cases=[(f"c{i}", []) for i in range(6)], graders=[])
    Run.objects.filter(id=run.id).update(
        status=Run.Status.CANCELLED, finished_at=None, trials_total=6, source=Run.Source.EXECUTED
    )
    add_trial(run, "c0", 1)
    add_trial(run, "c1", 1)
    add_trial(run, "c2", 1, status="error", error="timeout")
    for key in ("c3", "c4", "c5"):
        add_trial(run, key, 1, status="cancelled")
    run = run_finalize(run_id=run.id)
    assert (run.status, run.error_message) == (Run.Status.CANCELLED, "1 of 3 trials errored")
    count = run_trial_count(run)
    assert (count.finished, count.planned, count.errored, count.cancelled) == (3, 6, 1, 3)
    assert count.summary == "3 of 6 trials finished, 1 errored, 3 cancelled"
    report = run_report(run=run)
    assert report.errored_banner == "1 of 3 trials errored"
    assert (report.trials.pending, report.trials.cancelled) == (0, 3)
    assert (report.overall.pending, report.overall.cancelled) == (0, 3)


def test_cancelling_a_finished_run_changes_nothing(llm, django_capture_on_commit_callbacks):
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=make_suite({"a": "[answer=yes] a"}),
        name="r",
        target=openai_target(llm),
        graders=GRADERS,
        trials_per_case=1,
    )
    assert run_cancel(run=run) is False
    assert run.status == Run.Status.SUCCEEDED


def test_it_refuses_a_run_without_graders(llm):
    with pytest.raises(DomainError, match="graders: a run needs at least one grader"):
        run_start(
            suite=ten_case_suite(),
            name="r",
            target=openai_target(llm),
            graders=[],
            trials_per_case=1,
        )
    assert Run.objects.count() == 0


def test_a_run_whose_grader_errors_ends_failed_not_succeeded(django_capture_on_commit_callbacks):
    suite = make_suite({"a": "x", "b": "y"})
    run = start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r",
        target={"kind": "simulated", "seed": 1, "default_pass_probability": 1.0},
        graders=[
            {
                "key": "oracle",
                "kind": "python",
                "config": {"function": "tests.grader_oracles:raises"},
            }
        ],
        trials_per_case=2,
    )
    assert run.status == Run.Status.FAILED
    assert run.trials_errored == 0
    assert run.error_message == "4 grade errors"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"target": {"prompt_template": "Answer \ud800 $input"}}, "target.prompt_template"),
        ({"target": {"model": "m\ud800"}}, "target.model"),
        ({"target": {"settings": {"stop": ["\x00"]}}}, "target.settings.stop[0]"),
        (
            {"graders": [{"key": "g", "kind": "contains", "config": {"value": "\udfff"}}]},
            "graders[0].config.value",
        ),
        ({"source_version": "v\x00"}, "source_version"),
        ({"source_version": "x" * 201}, "source_version"),
        ({"name": "r\ud800"}, "name"),
    ],
)
def test_it_refuses_text_the_database_cannot_store_anywhere_in_a_run(llm, change, field):
    """Hostile text is refused the same way on every path that starts a run (form, API,
    command all call run_start): NUL or a lone surrogate anywhere, naming the field and the
    path inside it (the command named only ``target`` where the API named ``target.model``)."""
    target = openai_target(llm)
    if "target" in change:
        target = {**target, **change["target"]}
        if "settings" in change["target"]:
            target["settings"] = {
                **openai_target(llm).get("settings", {}),
                **change["target"]["settings"],
            }
    with pytest.raises(DomainError) as info:
        run_start(
            suite=ten_case_suite(),
            name=change.get("name", "r"),
            target=target,
            graders=change.get("graders", GRADERS),
            trials_per_case=1,
            source_version=change.get("source_version", ""),
        )
    assert info.value.field == field
    assert Run.objects.count() == 0 and Trial.objects.count() == 0


def test_the_api_answers_400_for_a_lone_surrogate_in_the_target(llm, client, carol):
    suite = ten_case_suite()
    client.force_login(carol)
    graders = json.dumps(GRADERS)
    target = '{"kind": "callable", "path": "sys:exit", "settings": {"a": "\\ud800"}}'
    body = (
        f'{{"suite": "{suite.uuid}", "name": "x", "trials_per_case": 1, '
        f'"graders": {graders}, "target": {target}}}'
    )
    response = client.post("/api/runs/start", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert Run.objects.count() == 0


def test_two_starts_with_one_name_at_once_give_one_run_and_a_400_never_a_500(monkeypatch):
    """A double submit: both requests pass the name check before either inserts (four
    concurrent POST /api/runs/start on the demo gave a 201, two 400s and a 500, an
    IntegrityError). The race is replayed here by letting the check miss the run another
    request has just committed."""
    from django.db.models.query import QuerySet  # noqa: PLC0415 - this test's patch only

    suite = ten_case_suite()
    target = {"kind": "simulated", "seed": 1}
    run_start(suite=suite, name="twice", target=target, graders=GRADERS, trials_per_case=1)
    real_exists, calls = QuerySet.exists, []

    def exists_missing_the_first_time(self) -> bool:  # the check ran before the other insert
        calls.append(1)
        return False if len(calls) == 1 else real_exists(self)

    monkeypatch.setattr(QuerySet, "exists", exists_missing_the_first_time)
    with pytest.raises(DomainError) as info:
        run_start(suite=suite, name="twice", target=target, graders=GRADERS, trials_per_case=1)
    assert info.value.field == "name" and "already exists" in info.value.message
    monkeypatch.undo()
    assert Run.objects.filter(name="twice").count() == 1
    assert Trial.objects.count() == 10


def test_the_migration_counts_each_runs_cancelled_trials_into_its_new_counter():
    from importlib import import_module  # noqa: PLC0415

    from django.apps import apps  # noqa: PLC0415

    migration = import_module("evals.migrations.0019_run_trials_cancelled")
    run = make_run(cases=[("c0", []), ("c1", []), ("c2", [])], graders=[])
    other = make_run(cases=[("c0", [])], graders=[], name="R2")
    add_trial(run, "c0", 1)
    add_trial(run, "c1", 1, status="cancelled")
    add_trial(run, "c2", 1, status="cancelled")
    add_trial(other, "c0", 1)
    migration.backfill(apps, None)
    run.refresh_from_db()
    other.refresh_from_db()
    assert (run.trials_cancelled, other.trials_cancelled) == (2, 0)
