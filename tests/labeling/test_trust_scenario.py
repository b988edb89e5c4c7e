"""The issue's scenario, end to end: a grader ladder (``contains`` first, a lenient rubric
judge second with ``skip_if_failed``), a calibration set built through the page, honest
labels. The judge passes every wrong answer it sees, so it must not become trusted, and its
figures must be the ones it shows on a run without the ladder."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite
from evals.report.selectors import run_report
from evals.runner.start import run_start
from judges.models import JudgeApproval
from labeling.approval import judge_trust_approve
from labeling.labels import label_submit
from labeling.models import CalibrationSet
from labeling.selectors import calibration_compute
from tests.conftest import PASSWORD
from tests.fakellm import FakeLLM
from tests.judge_builders import make_version, verdict_json

pytestmark = pytest.mark.django_db

RIGHT = "Paris"
WRONG_BUT_CONTAINS = "Not Paris: Lyon"  # passes `contains`, reaches the judge
WRONG = "Lyon"  # fails `contains`: the judge's rung is skipped
ANSWERS = {f"r{i:02d}": RIGHT for i in range(20)}
ANSWERS |= {f"w{i:02d}": WRONG_BUT_CONTAINS for i in range(20)}
ANSWERS |= {f"x{i:02d}": WRONG for i in range(20)}
CONTAINS = {"key": "answer", "kind": "contains", "config": {"value": "Paris"}}


def lenient(body: dict) -> str | None:
    """The judge model passes everything; the target answers ``[answer=...]``."""
    return verdict_json("PASS", "looks fine") if body.get("model") == "judge-model" else None


@pytest.fixture
def llm():
    server = FakeLLM(retry_after="0", responder=lenient)
    server.start()
    yield server
    server.stop()


def _run(capture, llm, suite: Suite, name: str, graders: list[dict]) -> Run:
    with capture(execute=True):
        run = run_start(
            suite=suite, name=name, target=llm.target(), graders=graders, trials_per_case=1
        )
    run.refresh_from_db()
    return run


def _build_through_the_page(client, run: Run, version, name: str) -> CalibrationSet:
    response = client.post(
        reverse("labeling:set-new"),
        {
            "name": name,
            "run": str(run.uuid),
            "judge_version": str(version.uuid),
            "size": 60,
            "seed": 0,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return CalibrationSet.objects.get(name=name)


def _label_honestly(cset: CalibrationSet, reviewer) -> None:
    for item in cset.items.select_related("trial__case"):
        right = ANSWERS[item.trial.case.key] == RIGHT
        label_submit(trial=item.trial, reviewer=reviewer, verdict="pass" if right else "fail")


def test_a_lenient_judge_behind_a_ladder_cannot_become_trusted(
    client, llm, alice, bob, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    suite = Suite.objects.create(name="capitals")
    for key, answer in ANSWERS.items():
        Case.objects.create(
            suite=suite, key=key, input=f"[answer={answer}] capital of France?", expected=RIGHT
        )
    version = make_version(llm)
    judge = {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}
    ladder = _run(
        capture,
        llm,
        suite,
        "ladder",
        [CONTAINS, {**judge, "config": {**judge["config"], "skip_if_failed": True}}],
    )
    alone = _run(capture, llm, suite, "judge alone", [judge])

    # The 20 wrong answers `contains` caught are "not judged", never judge fails.
    skipped = Grade.objects.filter(trial__run=ladder, grader="judge", status="not_judged")
    assert skipped.count() == 20 and not skipped.filter(passed__isnull=False).exists()
    assert {g.trial.case.key[0] for g in skipped.select_related("trial__case")} == {"x"}

    assert client.login(username=alice.username, password=PASSWORD)
    cset = _build_through_the_page(client, ladder, version, "ladder set")
    # Only trials the judge actually judged: none of the 20 skipped ones.
    keys = sorted(cset.items.values_list("trial__case__key", flat=True))
    assert len(keys) == 40 and not any(k.startswith("x") for k in keys)
    _label_honestly(cset, bob)

    cal = calibration_compute(judge_version=version, calibration_set=cset)
    assert (cal.n, cal.n_not_judged, cal.n_judge_errors) == (40, 0, 0)
    c = cal.confusion
    assert (c.judge_pass_human_pass, c.judge_pass_human_fail) == (20, 20)
    assert (c.judge_fail_human_pass, c.judge_fail_human_fail) == (0, 0)
    assert cal.far.rate == 1.0 and cal.kappa.kappa == 0.0
    assert not cal.trust_ok
    assert {ch.key for ch in cal.trust_checks if not ch.ok} >= {"far_upper", "kappa_lower"}
    with pytest.raises(DomainError, match="thresholds not met"):
        judge_trust_approve(judge_version=version, by=alice, calibration_set=cset)
    html = client.get(
        reverse("labeling:calibration", kwargs={"version_id": version.uuid}) + f"?set={cset.uuid}"
    ).content.decode()
    assert 'id="mark-trusted" disabled' in html
    assert not JudgeApproval.objects.exists()

    # The same judge on a run without the ladder: the same figures.
    alone_set = _build_through_the_page(client, alone, version, "alone set")
    _label_honestly(alone_set, bob)
    alone_cal = calibration_compute(judge_version=version, calibration_set=alone_set)
    assert alone_cal.n == 60
    assert (alone_cal.far.rate, alone_cal.kappa.kappa, alone_cal.frr.rate) == (
        cal.far.rate,
        cal.kappa.kappa,
        cal.frr.rate,
    )
    assert not alone_cal.trust_ok
    # On the cases both sets hold, the judge's verdicts and the confusion are identical.
    verdicts = {
        run.id: dict(
            Grade.objects.filter(trial__run=run, grader="judge", status="ok").values_list(
                "trial__case__key", "passed"
            )
        )
        for run in (ladder, alone)
    }
    assert {k: verdicts[alone.id][k] for k in keys} == {k: verdicts[ladder.id][k] for k in keys}
    # The judge's own pass rate in each run report: 100% of what it judged, both times
    # (the ladder's skipped rungs are neither its passes nor its fails).
    for run, judged in ((ladder, 40), (alone, 60)):
        figures = next(f for f in run_report(run=run).graders if f.key == "judge")
        assert (figures.trials_passed, figures.trials_graded) == (judged, judged)
    ladder_overall = run_report(run=ladder).overall
    assert (ladder_overall.trials_passed, ladder_overall.trials_graded) == (40, 60)
