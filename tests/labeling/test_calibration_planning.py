"""Planned calibration sets: drawn only from trials the judge judged, strata by the
signals of a human fail, inclusion probabilities recorded, the weighted population estimate
beside the sample figures, the plan on the set page and the top-up (service and button)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from core.errors import DomainError
from evals.models import Grade
from judges.models import JudgeVersion
from labeling.calibration_sets import (
    calibration_item_add,
    calibration_set_build,
    calibration_set_top_up,
)
from labeling.labels import label_submit
from labeling.models import CalibrationItem
from labeling.sampling import set_plan_get
from labeling.selectors import calibration_compute
from stats.calibration_plan import weighted_far
from stats.intervals import wilson_interval
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def graded(db):
    """200 trials: the judge fails 1..40 and passes the rest. Trial 41..50: a cheap
    deterministic rung failed them; 51..55: judge v2 failed them; 56..60: low scores;
    61..64: errored judge grades; 65..68: rungs the ladder skipped (not judged)."""
    run, version, trials = judged_run(200, judge_fails=40)
    for t in trials[40:50]:
        Grade.objects.create(trial=t, grader="answer", passed=False, reason="missing")
    v2 = JudgeVersion.objects.create(judge=version.judge, number=2, model="m2", protocol="p1")
    for t in trials[50:55]:
        Grade.objects.create(
            trial=t, grader=v2.grader_key, judge_version=v2, passed=False, reason="FAIL"
        )
    Grade.objects.filter(trial__in=trials[55:60], judge_version=version).update(score=0.6)
    Grade.objects.filter(trial__in=trials[60:64], judge_version=version).update(
        status=Grade.Status.ERROR, passed=None
    )
    Grade.objects.filter(trial__in=trials[64:68], judge_version=version).update(
        status=Grade.Status.NOT_JUDGED, passed=None, reason="not judged: ..."
    )
    return run, version, trials


def _by_stratum(cset) -> dict[str, list[CalibrationItem]]:
    out: dict[str, list[CalibrationItem]] = {}
    for item in cset.items.all():
        out.setdefault(item.stratum, []).append(item)
    return out


def test_a_planned_set_is_drawn_from_judged_trials_by_signal_with_weights(carol, graded):
    run, version, trials = graded
    cset = calibration_set_build(run=run, judge_version=version, size=60, name="p", by=carol)
    sizes = {k: len(s["trials"]) for k, s in cset.design["strata"].items()}
    assert sizes == {
        "judge_fail/none": 40,
        "judge_pass/cheap_failed": 10,
        "judge_pass/versions_disagree": 5,
        "judge_pass/low_score": 5,
        "judge_pass/none": 132,  # 200 - 40 - 10 - 5 - 5 - 4 errored - 4 not judged
    }
    excluded = {t.id for t in trials[60:68]}
    assert not excluded & set(cset.items.values_list("trial_id", flat=True))
    by = _by_stratum(cset)
    assert sum(len(v) for v in by.values()) == 60 and set(by) == set(sizes)
    for key, items in by.items():
        assert all(i.inclusion_probability == pytest.approx(len(items) / sizes[key]) for i in items)
    # Likely human fails first: the signal strata are sampled more densely than plain passes.
    frac = {k: len(v) / sizes[k] for k, v in by.items()}
    assert frac["judge_pass/cheap_failed"] > frac["judge_pass/none"]
    assert frac["judge_fail/none"] > frac["judge_pass/none"]
    assert frac["judge_pass/none"] >= 0.25 * max(frac.values()) - 1 / 132


def test_the_weighted_far_is_the_population_estimate_beside_the_sample(carol, bob, graded):
    run, version, _ = graded
    cset = calibration_set_build(run=run, judge_version=version, size=60, name="p", by=carol)
    items = list(cset.items.select_related("trial"))
    # Honest labels: the judge's fails and the cheap-rung failures are human fails, and one
    # plain judge pass in the set is a human fail too.
    plain = [i for i in items if i.stratum == "judge_pass/none"]
    fail_ids = {
        i.trial_id for i in items if i.stratum in ("judge_fail/none", "judge_pass/cheap_failed")
    }
    fail_ids.add(plain[0].trial_id)
    for i in items:
        label_submit(
            trial=i.trial, reviewer=bob, verdict="fail" if i.trial_id in fail_ids else "pass"
        )
    cal = calibration_compute(judge_version=version, calibration_set=cset)
    fails = [i for i in items if i.trial_id in fail_ids]
    accepts = [i for i in fails if i.stratum != "judge_fail/none"]
    assert (cal.far.numerator, cal.far.denominator) == (len(accepts), len(fails))
    assert cal.far.ci_high == pytest.approx(wilson_interval(len(accepts), len(fails))[1])
    expected = weighted_far(
        [i.stratum != "judge_fail/none" for i in fails],
        [1 / i.inclusion_probability for i in fails],
    )
    got = cal.far_weighted
    assert (got.rate, got.n, got.n_eff, got.ci_low, got.ci_high) == pytest.approx(
        (expected.rate, expected.n, expected.n_eff, expected.ci_low, expected.ci_high)
    )
    # The sample over-represents the cheap rung's failures (false accepts here), so the
    # sample FAR overstates the population's; the weights undo it.
    assert cal.far_weighted.rate < cal.far.rate
    checks = {c.key: c for c in cal.trust_checks}
    assert checks["far_weighted_upper"].value == expected.ci_high
    assert not checks["far_weighted_upper"].ok and not cal.trust_ok


def test_a_hand_made_set_has_no_weights_and_says_so(carol, graded):
    run, version, trials = graded
    cset = calibration_set(run, version, trials[:5])
    cal = calibration_compute(judge_version=version, calibration_set=cset)
    assert cal.far_weighted is None and "no sampling weights" in cal.weights_note
    planned = calibration_set_build(run=run, judge_version=version, size=10, name="p", by=carol)
    extra = next(t for t in trials[70:] if not planned.items.filter(trial=t).exists())
    calibration_item_add(calibration_set=planned, trial=extra, by=carol)
    cal = calibration_compute(judge_version=version, calibration_set=planned)
    assert cal.far_weighted is None and "added by hand" in cal.weights_note


def test_the_set_page_says_how_many_to_label_and_the_button_tops_the_set_up(client, carol, bob):
    # A judge that fails 100 of 300 trials, on a suite whose false-accept threshold is 20%.
    run, version, _ = judged_run(300, judge_fails=100)
    run.suite.trust_thresholds = {"MAX_FAR": 0.2}
    run.suite.save()
    cset = calibration_set_build(run=run, judge_version=version, size=20, name="p", by=carol)
    first = cset.items.filter(stratum="judge_fail/none").first().trial
    label_submit(trial=first, reviewer=bob, verdict="fail")  # labeling started: frozen
    cset.refresh_from_db()
    assert cset.is_frozen
    plan = set_plan_get(calibration_set=cset)
    assert plan.plan.reachable and plan.to_add > 0
    assert plan.plan.to_label == 19 + plan.to_add
    assert client.login(username=carol.username, password=PASSWORD)
    url = reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})
    html = client.get(url).content.decode()
    assert f"Label about {plan.plan.to_label} more items ({plan.to_add} of them new items" in html
    assert "most likely human-fails" in html and "false-accept bound under 20%" in html
    assert f"Top the set up with {plan.to_add} items" in html
    response = client.post(
        reverse("labeling:set-top-up", kwargs={"set_id": cset.uuid}), follow=True
    )
    assert f"Added {plan.to_add} items." in response.content.decode()
    cset.refresh_from_db()
    assert cset.size == cset.items.count() == 20 + plan.to_add
    for key, items in _by_stratum(cset).items():
        population = len(cset.design["strata"][key]["trials"])
        assert all(i.inclusion_probability == pytest.approx(len(items) / population) for i in items)
    # After the top-up the plan asks only for labels.
    assert set_plan_get(calibration_set=cset).to_add == 0
    client.logout()
    assert client.login(username=bob.username, password=PASSWORD)
    html = client.get(url).content.decode()
    assert "sampling-plan" not in html  # a reviewer labels blind: no plan, no strata
    top_up = reverse("labeling:set-top-up", kwargs={"set_id": cset.uuid})
    assert client.post(top_up).status_code == 403


def test_a_set_page_says_when_no_draw_can_reach_the_bound(client, carol, graded):
    run, version, _ = graded  # ten judge passes a cheap rung failed: likely false accepts
    cset = calibration_set_build(run=run, judge_version=version, size=20, name="p", by=carol)
    plan = set_plan_get(calibration_set=cset)
    assert not plan.plan.reachable and not plan.can_top_up
    assert "No draw from this run is likely to bring the false-accept bound under 10%" in (
        plan.message
    )
    with pytest.raises(DomainError, match="No draw from this run"):
        calibration_set_top_up(calibration_set=cset, by=carol)


def test_top_up_refuses_reviewers_and_sets_without_a_design(bob, carol, graded):
    run, version, trials = graded
    cset = calibration_set_build(run=run, judge_version=version, size=10, name="p", by=carol)
    with pytest.raises(PermissionDenied):
        calibration_set_top_up(calibration_set=cset, by=bob)
    hand = calibration_set(run, version, trials[:5], name="hand")
    with pytest.raises(DomainError, match="no sampling design"):
        calibration_set_top_up(calibration_set=hand, by=carol)
