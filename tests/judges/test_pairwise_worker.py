"""Pairwise judging of two Assay runs end to end (issue 12, point 5): both runs and the
pairwise judge run are executed by a real Celery worker process against the project's
shared mock (``tests.mockllm``): its answer mode for the runs, its judge mode (model
``mock-judge``) for the judge, started with ``judge_run --pairwise BASE HEAD`` as a user
would.

The mock's judge answers ``pass`` when the case's expected token appears anywhere in the
prompt, so with ``verdict_slots`` {PASS: A, FAIL: B} it picks a slot by the pair's content
whatever the order: the same slot in both orders, which is a position-inconsistent judge.
Every pair must then be a tie (never a vote), position consistency 0 and first-slot wins
exactly twice the pairs holding the token; ``tests/judges/test_pairwise_runs.py`` checks
real preferences with a scripted judge."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evals.models import Case, Run, Suite, TrialPair
from evals.runner.start import run_start
from judges.models import JudgeRun, PairwiseVerdict
from judges.selectors import pairwise_tally_get, position_bias_list
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

CASES = 6
GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


def _command(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("judge_run", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


def test_two_runs_are_judged_pairwise_through_a_real_worker_against_the_shared_mock(
    worker_factory,  # noqa: F811
    mockllm,  # noqa: F811
    tmp_path,
):
    server = mockllm("--latency-ms", "0", "--judge-flip", "0")
    worker_factory(pool="threads", concurrency=2)
    suite = Suite.objects.create(name="pairwise-e2e")
    for i in range(CASES):
        Case.objects.create(
            suite=suite, key=f"k{i}", input=f"[case=k{i} p=0.5 expect=ANSWER-k{i}] The answer?"
        )
    target = {
        "kind": "openai",
        "base_url": server.base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        "concurrency": 4,
    }
    base = run_start(suite=suite, name="base", target=target, graders=GRADERS, trials_per_case=2)
    base = _run_wait(base, tmp_path)
    head = run_start(suite=suite, name="head", target=target, graders=GRADERS, trials_per_case=3)
    head = _run_wait(head, tmp_path)
    assert (base.status, head.status) == (Run.Status.SUCCEEDED, Run.Status.SUCCEEDED)
    version, _ = judge_version_create(
        judge_name="mock-pref",
        kind="pairwise",
        model="mock-judge",
        base_url=server.base_url,
        prompt_template="",
        params={"max_attempts": 1, "verdict_slots": {"PASS": "A", "FAIL": "B"}},
        output_schema={},
    )

    started = time.monotonic()
    code, text = _command(
        "--pairwise", str(base.uuid), "pairwise-e2e/head", "mock-pref", "--wait", "--timeout", "25"
    )
    assert code == 0, text + _worker_log(tmp_path)
    assert time.monotonic() - started < 25
    judge_run = JudgeRun.objects.get(base_run=base, run=head)
    # 6 cases x 2 attempts paired; the head's third attempts have no counterpart.
    assert (judge_run.status, judge_run.trials_total, judge_run.trials_graded) == (
        "succeeded",
        12,
        12,
    )
    assert (judge_run.unpaired, judge_run.trials_errored) == (6, 0)

    stats = server.stats()
    assert stats["requests"] == CASES * 2 + CASES * 3 + 12 * 2
    verdicts = PairwiseVerdict.objects.filter(judge_version=version)
    assert verdicts.count() == 24 and not verdicts.exclude(status="ok").exists()
    holding = 0
    for pair in TrialPair.objects.filter(id__in=judge_run.trial_ids).select_related(
        "case", "trial_a", "trial_b"
    ):
        token = f"ANSWER-{pair.case.key}"
        has = token in pair.trial_a.output or token in pair.trial_b.output
        holding += has
        seen = dict(verdicts.filter(pair=pair).values_list("position", "preferred"))
        assert seen == (
            {"original": "A", "swapped": "B"} if has else {"original": "B", "swapped": "A"}
        )
    assert 0 < holding < 12  # the mock's seed gives both kinds of pair
    assert stats["outcomes"]["judge_pass"] == 2 * holding
    tally = pairwise_tally_get(judge_run=judge_run)
    assert (tally.head_wins, tally.base_wins, tally.ties, tally.errors) == (0, 0, 12, 0)
    [bias] = position_bias_list(judge_version_ids=[version.id])
    assert (bias.pairs_consistent, bias.pairs_both) == (0, 12)
    assert (bias.first_slot_wins, bias.presentations) == (2 * holding, 24)

    code, text = _command(
        "--pairwise",
        "pairwise-e2e/base",
        "pairwise-e2e/head",
        "mock-pref",
        "--wait",
        "--timeout",
        "25",
    )
    assert code == 0, text
    assert JudgeRun.objects.get().status == "succeeded"  # the same judge run, started again
    assert server.stats()["requests"] == stats["requests"]  # stored verdicts are not asked again
