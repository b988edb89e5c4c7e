"""Calibration sets: stratified deterministic build, hand edits, frozen at the first label;
calibration on a set; the calibration_report command."""

from __future__ import annotations

import io
import json

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command

from core.errors import DomainError
from labeling.approval import judge_trust_approve
from labeling.calibration_sets import (
    calibration_item_add,
    calibration_item_remove,
    calibration_set_build,
)
from labeling.labels import label_submit
from labeling.models import CalibrationSet
from labeling.selectors import calibration_compute
from tests.calibration_builders import labeled_run

pytestmark = pytest.mark.django_db

# 60 trials, the judge passes 50 and fails 10, over two tags.
HUMANS = ["pass"] * 45 + ["fail"] * 15
JUDGES = ["pass"] * 45 + ["pass"] * 5 + ["fail"] * 10
TAGS = ["t1", "t2"] * 30


@pytest.fixture
def run_and_judge():
    run, version, trials = labeled_run(HUMANS, JUDGES, tags=TAGS)
    return run, version, trials


def _trial_ids(cset: CalibrationSet) -> list[int]:
    return list(cset.items.order_by("position").values_list("trial_id", flat=True))


def test_it_builds_the_same_set_from_the_same_seed(carol, run_and_judge):
    run, version, _ = run_and_judge
    a = calibration_set_build(run=run, judge_version=version, size=12, seed=7, name="a", by=carol)
    b = calibration_set_build(run=run, judge_version=version, size=12, seed=7, name="b", by=carol)
    c = calibration_set_build(run=run, judge_version=version, size=12, seed=8, name="c", by=carol)
    assert _trial_ids(a) == _trial_ids(b)
    assert set(_trial_ids(a)) != set(_trial_ids(c))
    assert a.size == 12 and len(set(_trial_ids(a))) == 12


def test_it_draws_likely_human_fails_first_and_keeps_every_stratum_sampled(alice, run_and_judge):
    run, version, _ = run_and_judge
    cset = calibration_set_build(run=run, judge_version=version, size=12, name="s", by=alice)
    strata = {key: len(s["trials"]) for key, s in cset.design["strata"].items()}
    # Every trial carries a gold label here: the judge's fails and passes of human fails
    # (certain fails, free to use) come first; the judge's passes of human passes stay
    # sampled (weights bounded).
    assert strata == {
        "judge_fail/known_fail": 10,
        "judge_pass/known_fail": 5,
        "judge_pass/known_pass": 45,
    }
    items = list(cset.items.values_list("stratum", "inclusion_probability"))
    drawn = {key: sum(1 for k, _ in items if k == key) for key in strata}
    assert sum(drawn.values()) == 12 and all(drawn.values())
    assert drawn["judge_fail/known_fail"] + drawn["judge_pass/known_fail"] >= 6
    for key, p in items:
        assert p == pytest.approx(drawn[key] / strata[key])


def test_it_takes_every_judge_fail_when_there_are_few(alice, run_and_judge):
    run, version, _ = run_and_judge
    cset = calibration_set_build(run=run, judge_version=version, size=30, name="s", by=alice)
    grades = {g.trial_id: g.passed for g in version.grades.all()}
    assert sum(1 for t in _trial_ids(cset) if not grades[t]) == 10
    assert cset.size == 30


def test_it_never_picks_a_trial_whose_judge_verdict_errored(alice):

    run, version, trials = labeled_run(["pass"] * 8, ["pass", "fail", None, None] * 2)
    errored = {t.id for t in trials} - set(
        version.grades.filter(status="ok").values_list("trial_id", flat=True)
    )
    assert len(errored) == 4
    cset = calibration_set_build(run=run, judge_version=version, size=8, name="s", by=alice)
    assert cset.size == 4 and not set(_trial_ids(cset)) & errored
    run2, version2, _ = labeled_run(["pass"] * 2, [None, None], suite="s2", run="r2")
    with pytest.raises(DomainError, match="judge_version: it has no successful verdict"):
        calibration_set_build(run=run2, judge_version=version2, size=2, name="t", by=alice)


@pytest.mark.parametrize("who", ["bob", "mallory"])
def test_it_refuses_building_a_set_by_a_reviewer_or_an_outsider(who, request, run_and_judge):
    run, version, _ = run_and_judge
    with pytest.raises(PermissionDenied):
        calibration_set_build(
            run=run, judge_version=version, name="s", by=request.getfixturevalue(who)
        )


def test_it_lets_an_engineer_add_and_remove_items_before_labeling(carol, run_and_judge):
    run, version, trials = run_and_judge
    cset = calibration_set_build(run=run, judge_version=version, size=5, name="s", by=carol)
    extra = next(t for t in trials if t.id not in _trial_ids(cset))
    calibration_item_add(calibration_set=cset, trial=extra, by=carol)
    calibration_item_add(calibration_set=cset, trial=extra, by=carol)  # idempotent
    assert _trial_ids(cset)[-1] == extra.id and cset.items.count() == 6
    assert calibration_item_remove(calibration_set=cset, trial=extra, by=carol)
    assert not calibration_item_remove(calibration_set=cset, trial=extra, by=carol)
    cset.refresh_from_db()
    assert cset.size == 5


def test_it_freezes_the_set_at_the_first_label_and_refuses_edits(bob, carol, run_and_judge):
    run, version, trials = run_and_judge
    cset = calibration_set_build(run=run, judge_version=version, size=5, name="s", by=carol)
    first = cset.items.first().trial
    label_submit(trial=first, reviewer=bob, verdict="pass")
    cset.refresh_from_db()
    assert cset.is_frozen
    extra = next(t for t in trials if t.id not in _trial_ids(cset))
    with pytest.raises(DomainError, match="is frozen"):
        calibration_item_add(calibration_set=cset, trial=extra, by=carol)
    with pytest.raises(DomainError):
        calibration_item_remove(calibration_set=cset, trial=first, by=carol)
    assert cset.items.count() == 5


def test_it_calibrates_on_the_sets_trials_only(alice, run_and_judge):
    run, version, _ = run_and_judge
    cset = calibration_set_build(run=run, judge_version=version, size=12, name="s", by=alice)
    cal = calibration_compute(judge_version=version, calibration_set=cset)
    everything = calibration_compute(judge_version=version)
    assert cal.n == 12 and everything.n == 60
    assert cal.calibration_set_id == cset.id
    assert cal.n_unlabeled == 0


def test_it_prints_strict_json_for_every_judge_version(alice):
    _, version, _ = labeled_run(["pass"] * 30, ["pass"] * 29 + [None])
    out = io.StringIO()
    call_command("calibration_report", "--json", stdout=out)
    payload = json.loads(out.getvalue(), parse_constant=lambda c: pytest.fail(c))
    [row] = payload["judge_versions"]
    assert (row["n"], row["n_judge_errors"]) == (29, 1)
    assert row["kappa"]["kappa"] is None
    assert row["kappa"]["reason"] == "undefined (only one class in the labels)"
    assert row["far"] == {
        "rate": None,
        "numerator": 0,
        "denominator": 0,
        "ci_low": None,
        "ci_high": None,
        "reason": "undefined (no human fails)",
    }
    assert row["trust"]["trusted"] is False


def test_it_prints_the_figures_and_trust_state_as_text(alice):
    _, version, _ = labeled_run(
        ["pass"] * 20 + ["fail"] * 40, ["pass"] * 20 + ["fail"] * 40, suite="qa"
    )
    judge_trust_approve(judge_version=version, by=alice)
    out = io.StringIO()
    call_command("calibration_report", "--suite", "qa", stdout=out)
    text = out.getvalue()
    assert "j1 / p1 v1: trusted (by alice" in text
    assert "false-accept rate: 0.0000 (0/40) [95% CI 0.0000, 0.0876]" in text
    assert "kappa: 1.0000" in text
    assert "  trust rule: met" in text
    assert (
        "    ok  upper 95% bound of the false-accept rate (sample, Wilson): 0.0876 <= 0.1" in text
    )
    assert "    ok  human fails (the FAR's denominator): 40 >= 35" in text
    assert "    ok  lower 95% bound of Cohen's kappa: 0.8646 >= 0.6" in text


def test_it_prints_which_bound_fails(alice):
    labeled_run(["pass"] * 20 + ["fail"] * 20, ["pass"] * 20 + ["fail"] * 20, suite="qa")
    out = io.StringIO()
    call_command("calibration_report", "--suite", "qa", stdout=out)
    text = out.getvalue()
    assert "  trust rule: not met" in text
    assert (
        "    NO  upper 95% bound of the false-accept rate (sample, Wilson): 0.1611 <= 0.1" in text
    )
    assert "    NO  human fails (the FAR's denominator): 20 >= 35" in text
    out = io.StringIO()
    call_command("calibration_report", "--json", stdout=out)
    checks = json.loads(out.getvalue())["judge_versions"][0]["trust_checks"]
    assert [c["key"] for c in checks if not c["ok"]] == ["human_fails", "far_upper"]
