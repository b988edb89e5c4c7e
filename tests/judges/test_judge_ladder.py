"""The grader ladder in a run: deterministic graders first, then judge versions (issue 4).

One real local server (tests/fakellm.py) plays both the target (model ``target-model``,
answering the case's ``[answer=...]`` marker) and the judge (model ``judge-model``, scripted
by a responder), so every call crosses real HTTP.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from core.errors import DomainError
from evals.grading.grader_config import parse_grader_specs
from evals.models import Case, Grade, Run, Suite
from evals.report.selectors import run_report
from evals.runner.start import run_start
from judges.grading import run_chunk_judge
from judges.tasks import run_chunk_judge as run_chunk_judge_task
from tests.fakellm import FakeLLM
from tests.judge_builders import make_version, trust, verdict_json

pytestmark = pytest.mark.django_db

SAYS_YES = {"key": "says-yes", "kind": "regex", "config": {"pattern": "^yes$"}}


class ScriptedJudge:
    """Replies to judge-model requests with ``reply`` and counts them; None for the target."""

    def __init__(self, reply: str = verdict_json("PASS", "the answer is right")) -> None:
        self.reply = reply
        self.calls = 0

    def __call__(self, body: dict) -> str | None:
        if body.get("model") != "judge-model":
            return None
        self.calls += 1
        return self.reply


@pytest.fixture
def judge():
    return ScriptedJudge()


@pytest.fixture
def llm(judge):
    server = FakeLLM(retry_after="0", responder=judge)
    server.start()
    yield server
    server.stop()


def suite(answers: dict[str, str]) -> Suite:
    s = Suite.objects.create(name="ladder")
    for key, answer in answers.items():
        Case.objects.create(
            suite=s, key=key, input=f"[answer={answer}] question {key}", expected="yes"
        )
    return s


def judge_spec(version, **config) -> dict:
    return {
        "key": "judge",
        "kind": "judge",
        "config": {"judge_version": str(version.uuid), **config},
    }


@pytest.fixture
def version(llm):
    """A rubric judge version on the fake server (not trusted)."""
    return make_version(llm)


@pytest.fixture
def ladder(llm, version, django_capture_on_commit_callbacks) -> Callable[..., Run]:
    """``ladder(answers, n=1, target_concurrency=None, **judge_config)``: a run of the
    cases ``answers`` (key -> the target's answer) × ``n`` trials, graded by ``SAYS_YES``
    then ``version`` with ``judge_config``, executed eagerly on commit; the run, refreshed.
    ``target_concurrency`` sets the target's ``concurrency`` (a chunk holds at least that
    many trials)."""

    def start(
        answers: dict[str, str], n: int = 1, target_concurrency: int | None = None, **judge_config
    ) -> Run:
        extra = {} if target_concurrency is None else {"concurrency": target_concurrency}
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(
                suite=suite(answers),
                name="r",
                target=llm.target(**extra),
                graders=[SAYS_YES, judge_spec(version, **judge_config)],
                trials_per_case=n,
            )
        run.refresh_from_db()
        return run

    return start


@pytest.fixture
def enqueued(monkeypatch) -> list[tuple[int, list[int]]]:
    """The judge rung's chunk messages ``(run_id, trial_ids)``, kept here instead of sent."""
    messages: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        "evals.runner.execute._judge_chunk_enqueue",
        lambda run_id, ids: messages.append((run_id, ids)),
    )
    return messages


# -- parsing -------------------------------------------------------------------------------


def test_it_accepts_a_judge_version_in_a_grader_set(version):
    [spec] = parse_grader_specs([judge_spec(version, skip_if_failed=True)])
    assert (spec.is_judge, spec.config["skip_if_failed"]) == (True, True)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"judge_version": "0b7e1b1c-2a51-4b8e-9d7a-6f0a4e2f9c11"},
            "graders[0].config.judge_version: no judge version with id",
        ),
        ({"judge_version": "v1"}, "graders[0].config.judge_version: no judge version 'v1'"),
        ({}, "graders[0].config.judge_version: required"),
        (
            {"judge_version": "0b7e1b1c-2a51-4b8e-9d7a-6f0a4e2f9c11", "skip_if_failed": "yes"},
            "graders[0].config.skip_if_failed: expected a boolean",
        ),
    ],
)
def test_it_refuses_a_bad_judge_spec_naming_the_field(config, message):
    with pytest.raises(DomainError) as error:
        parse_grader_specs([{"key": "judge", "kind": "judge", "config": config}])
    assert str(error.value).startswith(message)


def test_it_refuses_a_pairwise_judge_as_a_trial_grader(llm):
    version = make_version(llm, kind="pairwise", name="pw")
    with pytest.raises(DomainError, match="pairwise judge"):
        parse_grader_specs([judge_spec(version)])


# -- the ladder in a run ---------------------------------------------------------------------


def test_a_run_grades_deterministically_then_with_a_provisional_judge(judge, version, ladder):
    run = ladder({"c1": "yes", "c2": "yes"}, n=2)
    grades = Grade.objects.filter(trial__run=run, grader="judge")
    assert run.status == Run.Status.SUCCEEDED
    assert judge.calls == 4 and grades.count() == 4
    assert {(g.passed, g.gating, g.judge_version_id, g.details["decided_by"]) for g in grades} == {
        (True, False, version.id, "judge")
    }
    assert {(g.reason, g.details["reasoning"]) for g in grades} == {
        ("judge: PASS", "the answer is right")
    }
    # the snapshot says the provisional judge does not gate, so the report cannot count it
    assert run.graders[1]["gating"] is False
    assert run_report(run=run).trials.judge_errors == 0


def test_a_trusted_judge_version_gates(version, ladder):
    trust(version)
    run = ladder({"c1": "yes"})
    assert "gating" not in run.graders[1]
    assert list(
        Grade.objects.filter(trial__run=run, grader="judge").values_list("gating", flat=True)
    ) == [True]


def test_skip_if_failed_leaves_the_judge_out_when_a_deterministic_grader_failed(judge, ladder):
    run = ladder({"c1": "yes", "c2": "no", "c3": "no"}, skip_if_failed=True)
    by_case = {
        g.trial.case.key: g
        for g in Grade.objects.filter(trial__run=run, grader="judge").select_related("trial__case")
    }
    assert judge.calls == 1
    assert by_case["c1"].details["decided_by"] == "judge"
    assert [by_case[k].details for k in ("c2", "c3")] == [
        {"decided_by": "says-yes", "skipped": True}
    ] * 2
    assert (
        by_case["c2"].reason == "not judged: deterministic grader 'says-yes' already "
        "failed this trial"
    )
    # Not judged: neither a pass nor a fail.
    assert [(by_case[k].status, by_case[k].passed, by_case[k].score) for k in ("c2", "c3")] == [
        (Grade.Status.NOT_JUDGED, None, None)
    ] * 2
    report = run_report(run=run)
    judge_figures = next(f for f in report.graders if f.key == "judge")
    # The judge's own pass rate counts only the trial it judged; the skipped rungs are
    # "not graded", never fails; the trials still fail overall (the gating rung failed them).
    assert (judge_figures.trials_passed, judge_figures.trials_graded) == (1, 1)
    assert (report.overall.trials_passed, report.overall.trials_graded) == (1, 3)
    assert report.judge_calls.calls == 1
    assert not any(g.grader == "judge" for g in report.failure_reasons)


def test_without_skip_if_failed_the_judge_sees_every_ok_trial(judge, ladder):
    ladder({"c1": "yes", "c2": "no"})
    assert judge.calls == 2


def test_an_unparseable_judge_reply_is_an_errored_grade_counted_at_the_top(judge, ladder):
    judge.reply = "I think this is mostly fine."
    run = ladder({"c1": "yes", "c2": "yes", "c3": "yes"})
    grades = Grade.objects.filter(trial__run=run, grader="judge")
    assert {(g.status, g.passed, g.reason) for g in grades} == {
        (Grade.Status.ERROR, None, "unparseable")
    }
    assert grades.first().details["raw_reply"] == "I think this is mostly fine."
    assert run_report(run=run).trials.judge_errors == 3


def test_the_run_stays_running_until_its_judge_grades_are_in(judge, ladder, enqueued):
    run = ladder({"c1": "yes", "c2": "yes"})
    assert (run.status, run.trials_finished, judge.calls) == (Run.Status.RUNNING, 2, 0)
    assert len(enqueued) == 1
    run_chunk_judge_task.delay(*enqueued[0])
    run.refresh_from_db()
    assert (run.status, judge.calls) == (Run.Status.SUCCEEDED, 2)


def test_a_chunk_that_took_other_chunks_trials_enqueues_their_judge_rung_too(
    judge, ladder, enqueued, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 2}
    # Three chunk messages; the first (eager) calls all five trials, the other two nothing.
    run = ladder({f"c{i}": "yes" for i in range(1, 6)}, target_concurrency=2)
    ids = sorted(run.trials.values_list("id", flat=True))
    *first, second, third = [sorted(chunk) for _, chunk in enqueued]
    # The first message sent the judge rung of every trial it wrote; each later
    # one its own trials (the judge service skips those already judged).
    assert sorted(i for chunk in first for i in chunk) == ids
    assert (second, third) == (ids[2:4], ids[4:5])
    for message in enqueued:
        run_chunk_judge_task.delay(*message)
    run.refresh_from_db()
    assert (run.status, judge.calls) == (Run.Status.SUCCEEDED, 5)
    assert Grade.objects.filter(trial__run=run, grader="judge").count() == 5


def test_the_judge_rung_enqueues_only_after_commit(
    llm, judge, version, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_start(
            suite=suite({"c1": "yes"}),
            name="r",
            target=llm.target(),
            graders=[SAYS_YES, judge_spec(version)],
            trials_per_case=1,
        )
    assert len(callbacks) == 1  # the chunk; its judge task is enqueued by the chunk itself
    assert judge.calls == 0 and not Grade.objects.exists()


def test_a_redelivered_judge_chunk_adds_no_grade_and_no_call(judge, ladder):
    run = ladder({"c1": "yes", "c2": "yes"})
    ids = list(run.trials.values_list("id", flat=True))
    assert run_chunk_judge(run_id=run.id, trial_ids=ids) == 0
    run_chunk_judge_task.delay(run.id, ids)
    assert Grade.objects.filter(trial__run=run, grader="judge").count() == 2
    assert judge.calls == 2


def test_a_cancelled_run_is_not_judged(judge, ladder, enqueued):
    run = ladder({"c1": "yes"})
    Run.objects.filter(id=run.id).update(status=Run.Status.CANCELLED)
    assert run_chunk_judge(run_id=run.id, trial_ids=enqueued[0][1]) == 0
    assert judge.calls == 0
