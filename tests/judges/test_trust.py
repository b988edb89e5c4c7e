"""Trust: only leads approve and revoke, only when the thresholds hold; never inherited."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import override_settings

from core.errors import DomainError
from evals.report.selectors import run_report
from judges.models import JudgeApproval, JudgeVersion
from judges.trust import trust_revoke
from labeling.approval import judge_trust_approve
from labeling.labels import label_submit
from labeling.selectors import calibration_compute
from tests.calibration_builders import good_judge_run, labeled_run

pytestmark = pytest.mark.django_db


def test_it_lets_a_lead_approve_a_judge_that_meets_the_thresholds(alice):
    _, version, _ = good_judge_run()
    approval = judge_trust_approve(judge_version=version, by=alice)
    version = JudgeVersion.objects.get(pk=version.pk)
    assert version.is_trusted and version.approvals.get(revoked_at__isnull=True) == approval
    assert approval.approved_by == alice
    assert approval.figures["n"] == 60
    assert approval.figures["kappa"]["kappa"] == 1.0
    assert approval.figures["far"] == {
        "rate": 0.0,
        "numerator": 0,
        "denominator": 40,
        "ci_low": 0.0,
        "ci_high": approval.figures["far"]["ci_high"],
        "reason": "",
    }
    assert 0.087 < approval.figures["far"]["ci_high"] < 0.088  # Wilson upper end for 0/40
    checks = {c["key"]: c for c in approval.figures["trust_checks"]}
    assert all(c["ok"] for c in checks.values())
    assert checks["human_fails"]["threshold"] == 35
    assert checks["far_upper"]["value"] == approval.figures["far"]["ci_high"]


@pytest.mark.parametrize("who", ["bob", "carol", "mallory"])
def test_it_refuses_approval_by_anyone_but_a_lead(who, request):
    _, version, _ = good_judge_run()
    with pytest.raises(PermissionDenied):
        judge_trust_approve(judge_version=version, by=request.getfixturevalue(who))
    version.refresh_from_db()
    assert not version.is_trusted and not JudgeApproval.objects.exists()


def test_it_refuses_approval_when_the_false_accept_rate_is_too_high(alice):
    # FAR 3/40 = 7.5% meets 10% as a point, but its Wilson upper bound is 19.9%.
    _, version, _ = good_judge_run(false_accepts=3)
    with pytest.raises(
        DomainError,
        match=r"upper 95% bound of the false-accept rate \(sample, Wilson\): 19.9% is above 10.0%",
    ):
        judge_trust_approve(judge_version=version, by=alice)
    assert not JudgeApproval.objects.exists()


def test_it_refuses_a_perfect_judge_on_too_few_human_fails(alice):
    # The case: kappa 1.000 and FAR 0/15 — the bound is 20.4%, and 15 human fails
    # can never show a bound under 10% (35 are needed).
    _, version, _ = good_judge_run(20, 15)
    cal = calibration_compute(judge_version=version)
    assert cal.kappa.kappa == 1.0 and cal.far.rate == 0.0
    assert cal.far.ci_high == pytest.approx(0.2039, abs=1e-4)
    assert not cal.trust_ok
    failed = {c.key for c in cal.trust_checks if not c.ok}
    assert failed == {"human_fails", "far_upper"}
    with pytest.raises(DomainError, match=r"human fails \(the FAR's denominator\): 15 is below 35"):
        judge_trust_approve(judge_version=version, by=alice)
    assert not JudgeApproval.objects.exists()


def test_it_refuses_approval_on_the_lower_bound_of_kappa(alice, settings):
    # kappa 0.88 passes MIN_KAPPA 0.8 as a point; its lower 95% bound does not.
    humans = ["pass"] * 20 + ["fail"] * 40
    judges = ["pass"] * 17 + ["fail"] * 3 + ["fail"] * 40
    _, other, _ = labeled_run(humans, judges)
    cal = calibration_compute(judge_version=other)
    assert cal.kappa.kappa > 0.8 > cal.kappa.ci_low
    assert cal.far.ci_high <= 0.1
    trust = {"MIN_N": 30, "MIN_KAPPA": 0.8, "MAX_FAR": 0.1}
    with (
        override_settings(ASSAY={**settings.ASSAY, "TRUST": trust}),
        pytest.raises(DomainError, match="lower 95% bound of Cohen's kappa"),
    ):
        judge_trust_approve(judge_version=other, by=alice)


def test_a_suite_overrides_the_thresholds(alice):
    run, version, _ = good_judge_run(20, 40)
    run.suite.trust_thresholds = {"MAX_FAR": 0.05}
    run.suite.save()
    cal = calibration_compute(judge_version=version, suite=run.suite)
    assert (cal.thresholds.max_far, cal.thresholds.min_human_fails) == (0.05, 73)
    assert not cal.trust_ok  # 40 human fails: the bound is 8.8% > 5%
    run.suite.trust_thresholds = {"MAX_FAR": "ten"}
    run.suite.save()
    with pytest.raises(DomainError, match="MAX_FAR must be a number"):
        calibration_compute(judge_version=version, suite=run.suite)


def test_it_refuses_approval_below_thirty_labeled_trials(alice):
    _, version, _ = good_judge_run(10, 10)
    with pytest.raises(DomainError, match=r"n \(compared trials\): 20 is below 30"):
        judge_trust_approve(judge_version=version, by=alice)


def test_it_refuses_approval_when_kappa_is_undefined(alice):
    _, version, _ = labeled_run(["pass"] * 30, ["pass"] * 30)
    with pytest.raises(DomainError, match="only one class"):
        judge_trust_approve(judge_version=version, by=alice)


def test_it_reads_the_thresholds_from_settings(alice, settings):
    _, version, _ = good_judge_run()
    trust = {"MIN_N": 70, "MIN_KAPPA": 0.6, "MAX_FAR": 0.1}
    with (
        override_settings(ASSAY={**settings.ASSAY, "TRUST": trust}),
        pytest.raises(DomainError, match=r"n \(compared trials\): 60 is below 70"),
    ):
        judge_trust_approve(judge_version=version, by=alice)


def test_it_refuses_approval_on_figures_that_changed_since_the_page_loaded(alice, bob):
    _, version, trials = good_judge_run()
    shown = calibration_compute(judge_version=version)
    label_submit(trial=trials[0], reviewer=bob, verdict="fail")  # now a human disagreement
    with pytest.raises(DomainError, match="changed since the page was loaded"):
        judge_trust_approve(judge_version=version, by=alice, figures=shown)


def test_it_never_passes_trust_to_a_new_version(alice):
    _, version, _ = good_judge_run()
    judge_trust_approve(judge_version=version, by=alice)
    newer = JudgeVersion.objects.create(
        judge=version.judge, number=2, model="j1", protocol="p1", prompt_template="changed"
    )
    assert not newer.is_trusted and not newer.approvals.exists()


def test_it_lets_a_lead_revoke_trust_with_a_reason(alice):
    _, version, _ = good_judge_run()
    judge_trust_approve(judge_version=version, by=alice)
    approval = trust_revoke(judge_version=version, by=alice, reason="drifted on v2 data")
    version.refresh_from_db()
    assert not JudgeVersion.objects.get(pk=version.pk).is_trusted
    assert (approval.revoked_by, approval.revoke_reason) == (alice, "drifted on v2 data")
    assert approval.revoked_at is not None and approval.figures["n"] == 60
    again = judge_trust_approve(judge_version=version, by=alice)  # may be approved again
    assert JudgeApproval.objects.count() == 2
    assert list(JudgeApproval.objects.active()) == [again]


def test_it_refuses_to_revoke_an_approval_that_is_no_longer_the_active_one(alice):
    _, version, _ = good_judge_run()
    seen = judge_trust_approve(judge_version=version, by=alice)
    trust_revoke(judge_version=version, by=alice, reason="audit", approval_uuid=seen.uuid)
    newer = judge_trust_approve(judge_version=version, by=alice)
    with pytest.raises(DomainError, match="a newer approval exists, by alice at") as refused:
        trust_revoke(judge_version=version, by=alice, reason="stale", approval_uuid=seen.uuid)
    assert (refused.value.field, refused.value.code) == ("approval", "conflict")
    assert refused.value.extra["current_approval"] == str(newer.uuid)
    assert JudgeVersion.objects.get(pk=version.pk).is_trusted


def test_it_refuses_a_revocation_without_a_reason(alice):
    _, version, _ = good_judge_run()
    judge_trust_approve(judge_version=version, by=alice)
    with pytest.raises(DomainError, match="needs a reason"):
        trust_revoke(judge_version=version, by=alice, reason=" ")


@pytest.mark.parametrize("who", ["bob", "carol", "mallory"])
def test_it_refuses_revocation_by_anyone_but_a_lead(who, request, alice):
    _, version, _ = good_judge_run()
    judge_trust_approve(judge_version=version, by=alice)
    with pytest.raises(PermissionDenied):
        trust_revoke(judge_version=version, by=request.getfixturevalue(who), reason="x")
    version.refresh_from_db()
    assert JudgeVersion.objects.get(pk=version.pk).is_trusted


def test_it_refuses_a_second_approval_while_one_is_active(alice):
    _, version, _ = good_judge_run()
    judge_trust_approve(judge_version=version, by=alice)
    with pytest.raises(DomainError, match="already trusted"):
        judge_trust_approve(judge_version=version, by=alice)


def _corrected(run, version):
    """The run report's corrected pass rate of ``version``'s grader."""
    report = run_report(run=run)
    return next(f for f in report.graders if f.key == version.grader_key).corrected


def test_it_corrects_the_pass_rate_only_for_a_trusted_judge(alice):
    run, version, _ = good_judge_run(20, 60, false_accepts=1)  # observed 21/80, tnr 59/60
    untrusted = _corrected(run, version)
    assert untrusted.corrected is None and untrusted.reason == "the judge version is not trusted"
    assert (untrusted.observed_numerator, untrusted.observed_denominator) == (21, 80)
    judge_trust_approve(judge_version=version, by=alice)
    corrected = _corrected(run, version)
    assert (corrected.tpr, corrected.tnr) == (1.0, 59 / 60)
    # (21/80 + 59/60 - 1) / (1 + 59/60 - 1) = 0.25: the true pass rate here
    assert corrected.corrected == pytest.approx(0.25)
    assert corrected.ci_low < 0.25 < corrected.ci_high
