"""The grader-rung registry (``evals.grading.rungs``): the judges app registers the judge
rung when Django is ready; with nothing registered a judge grader is refused and the readers
of a run show no judge data.

One real local server (tests/fakellm.py) plays both the target and the judge, as in
test_judge_ladder.py.
"""

from __future__ import annotations

import pytest

from core.errors import DomainError
from evals.fingerprint import NO_JUDGE_TRUST, judge_trust_fingerprint
from evals.grading import rungs
from evals.grading.grader_config import parse_grader_specs
from evals.models import Case, Run, Suite
from evals.report.rows import run_rows_get
from evals.report.selectors import run_report
from evals.runner.start import run_start
from judges.rung import JUDGES_RUNG
from tests.fakellm import FakeLLM
from tests.judge_builders import make_version, trust, verdict_json

pytestmark = pytest.mark.django_db

SAYS_YES = {"key": "says-yes", "kind": "regex", "config": {"pattern": "^yes$"}}
CONFUSION = {
    "confusion": {
        "judge_pass_human_pass": 40,
        "judge_fail_human_pass": 2,
        "judge_fail_human_fail": 30,
        "judge_pass_human_fail": 3,
    }
}


def _judge_replies(body: dict) -> str | None:
    if body.get("model") != "judge-model":
        return None
    return verdict_json("PASS", "the answer is right")


@pytest.fixture
def llm():
    server = FakeLLM(retry_after="0", responder=_judge_replies)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def unregistered(monkeypatch):
    """No rung registered, as in a project without the judges app."""
    monkeypatch.setattr(rungs, "_rungs", {})


def _suite() -> Suite:
    suite = Suite.objects.create(name="rungs")
    for key in ("c1", "c2"):
        Case.objects.create(suite=suite, key=key, input=f"[answer=yes] {key}", expected="yes")
    return suite


def _judge_spec(version) -> dict:
    return {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}


def test_the_judges_app_registers_the_judge_rung():
    assert rungs.judge_rung() is JUDGES_RUNG
    assert rungs.RUNG_KINDS == ("judge",)


def test_only_a_rung_kind_can_be_registered():
    with pytest.raises(ValueError, match="'contains' has no rung"):
        rungs.rung_register(kind="contains", rung=JUDGES_RUNG)


def test_without_a_judge_rung_a_judge_grader_is_refused_on_its_kind(unregistered, llm):
    version = make_version(llm)

    with pytest.raises(DomainError) as caught:
        parse_grader_specs([SAYS_YES, _judge_spec(version)])

    assert caught.value.field == "graders[1].kind"
    assert caught.value.message == rungs.NO_JUDGE_RUNG


def test_without_a_judge_rung_a_run_naming_a_judge_does_not_start(unregistered, llm):
    version = make_version(llm)

    with pytest.raises(DomainError) as caught:
        run_start(
            suite=_suite(),
            name="r",
            target=llm.target(),
            graders=[SAYS_YES, _judge_spec(version)],
            trials_per_case=1,
        )

    assert caught.value.field == "graders[1].kind"
    assert not Run.objects.exists()


def test_without_a_judge_rung_the_readers_of_a_judged_run_show_no_judge_data(
    llm, django_capture_on_commit_callbacks, monkeypatch
):
    version = make_version(llm)
    trust(version, figures=CONFUSION)
    with django_capture_on_commit_callbacks(execute=True):
        run = run_start(
            suite=_suite(),
            name="r",
            target=llm.target(),
            graders=[SAYS_YES, _judge_spec(version)],
            trials_per_case=1,
        )
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    report = run_report(run=run)
    judged = next(f for f in report.graders if f.key == "judge")
    assert report.judge_calls.calls == 2 and judged.corrected.approval_id is not None
    assert run_rows_get(run=run).judges[version.id].trusted
    assert judge_trust_fingerprint() != NO_JUDGE_TRUST

    monkeypatch.setattr(rungs, "_rungs", {})

    report = run_report(run=run)
    judged = next(f for f in report.graders if f.key == "judge")
    assert report.judge_calls is None and judged.corrected is None
    assert (judged.trials_passed, judged.trials_graded) == (2, 2)  # its grades stay
    info = run_rows_get(run=run).judges[version.id]
    assert (info.label, info.trusted) == (f"judge version {version.id}", False)
    assert judge_trust_fingerprint() == NO_JUDGE_TRUST
