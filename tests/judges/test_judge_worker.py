"""No doubled judge calls and a cancel that stops paying, through a real Celery worker
process and the real broker (issue 13, items 2 and 4), counted where the bill is: the
requests the project's shared mock (``tests.mockllm``, judge mode) received.

The worker pattern is ``tests/evals/test_worker.py``'s (its own queue, the test's database,
Redis when ``REDIS_URL`` is set)."""

from __future__ import annotations

import time
import uuid

import pytest

from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from judges.models import JudgeCallRecord, JudgeClaim, JudgeRun
from judges.runs import judge_run_cancel, judge_run_start
from judges.tasks import run_chunk_judge
from judges.versions import judge_version_create
from tests.evals.test_worker import (  # noqa: F401 - fixtures
    _run_wait,
    _worker_log,
    worker_factory,
    worker_queue,
)
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

WAIT_SECONDS = 40


def _trials(n: int, *, status: str) -> tuple[Run, list[int]]:
    """A run of ``n`` ok trials (one per case), its status ``status``."""
    suite = Suite.objects.create(name=f"judge-worker-{uuid.uuid4().hex[:8]}")
    cases = Case.objects.bulk_create(
        Case(suite=suite, key=f"k{i:03d}", input=f"[case=k{i:03d} p=0.5 expect=ANSWER-k{i:03d}] Q?")
        for i in range(n)
    )
    run = Run.objects.create(suite=suite, name="judged", target_kind="callable", status=status)
    Trial.objects.bulk_create(
        Trial(run=run, case=c, attempt=1, status="ok", output=f"ANSWER-{c.key}") for c in cases
    )
    return run, list(Trial.objects.filter(run=run).order_by("id").values_list("id", flat=True))


def _version(server, **params):
    version, _ = judge_version_create(
        judge_name=f"mock-{uuid.uuid4().hex[:6]}",
        kind="rubric",
        model="mock-judge",
        base_url=server.base_url,
        prompt_template="",
        params={"max_attempts": 1, **params},
        output_schema={},
    )
    return version


def _settled(tmp_path, *, what: str) -> None:
    """Wait until no claim is held and no ledger row waits for its answer."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        open_calls = JudgeCallRecord.objects.filter(status=JudgeCallRecord.Status.SENT).exists()
        if not open_calls and not JudgeClaim.objects.exists():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} not settled after {WAIT_SECONDS} s; worker log:\n{_worker_log(tmp_path)}")


def test_a_judge_chunk_delivered_three_times_at_once_makes_one_call_per_grade(
    worker_factory,  # noqa: F811
    mockllm,  # noqa: F811
    tmp_path,
):
    """200 trials, the run's judge rung delivered three times (twice whole, once half) to a
    worker running three tasks at once: the mock answers exactly 200 calls, one per grade,
    and the report's judge spend counts exactly those 200 calls."""
    server = mockllm("--latency-ms", "40", "--judge-flip", "0")
    version = _version(server, concurrency=8)
    run, ids = _trials(200, status=Run.Status.RUNNING)
    run.graders = [
        {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}
    ]
    run.save()
    worker_factory(pool="threads", concurrency=3)

    run_chunk_judge.delay(run.id, ids)
    run_chunk_judge.delay(run.id, ids)
    run_chunk_judge.delay(run.id, ids[100:])
    run = _run_wait(run, tmp_path)
    _settled(tmp_path, what="judge rung")
    bill = server.stats()["requests"]

    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    assert Grade.objects.filter(trial__run=run, grader="judge").count() == 200
    assert bill == 200
    assert JudgeCallRecord.objects.filter(run=run, outcome="stored").count() == 200
    spend = run_report(run=run).judge_calls
    assert (spend.calls, spend.requests, spend.lost, spend.unanswered) == (bill, bill, 0, 0)
    assert spend.input_unknown == 0 and spend.input > 0


def test_a_cancel_mid_judge_job_stops_further_calls_to_the_mock(
    worker_factory,  # noqa: F811
    mockllm,  # noqa: F811
    tmp_path,
):
    """40 trials at 200 ms a call, two calls in flight (4 s uncancelled): the judge run is
    cancelled once the mock has answered a few calls; the calls in flight finish and are
    recorded, and the mock receives nothing after them."""
    server = mockllm("--latency-ms", "200", "--judge-flip", "0")
    version = _version(server, concurrency=2)
    run, _ = _trials(40, status=Run.Status.SUCCEEDED)
    worker_factory(pool="threads", concurrency=2)

    judge_run = judge_run_start(run=run, judge_version=version)
    deadline = time.monotonic() + WAIT_SECONDS
    while server.stats()["requests"] < 6:
        if time.monotonic() > deadline:
            pytest.fail(f"the judge run never started; worker log:\n{_worker_log(tmp_path)}")
        time.sleep(0.05)
    assert judge_run_cancel(judge_run=judge_run) is True
    at_cancel = server.stats()["requests"]
    _settled(tmp_path, what="cancelled judge run")
    time.sleep(0.6)  # three call latencies: a call started after the cancel would show
    bill = server.stats()["requests"]

    judge_run.refresh_from_db()
    assert judge_run.status == JudgeRun.Status.CANCELLED
    # At most the two calls in flight when the cancel was read finish after it.
    assert at_cancel <= bill <= at_cancel + 2, (at_cancel, bill)
    assert JudgeCallRecord.objects.filter(judge_run=judge_run).count() == bill
    stored = JudgeCallRecord.objects.filter(judge_run=judge_run, outcome="stored").count()
    assert Grade.objects.filter(trial__run=run).count() == stored == bill
    assert run_report(run=run).judge_calls.calls == bill
