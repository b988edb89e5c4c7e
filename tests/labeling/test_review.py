"""Review as a first-class step: review trials join a review queue; a trial is accepted
only when every review of its current output passed every dimension."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from core.errors import DomainError
from core.text import UNSTORABLE
from demo.expense_contract import CONTRACT_GRADERS, REVIEW_DIMENSIONS
from evals.grading.contract.decisions import output_hash, run_decisions
from evals.grading.recorded import run_grade
from evals.models import Run, Trial
from labeling.models import CalibrationSet
from labeling.review import review_dimensions, review_set_create, review_submit
from tests.evals.test_grade_run import recorded_run

ALL_PASS = {d: {"verdict": "pass", "critique": ""} for d in REVIEW_DIMENSIONS}


@pytest.fixture
def graded(db, carol):
    run = recorded_run()
    run_grade(run=run, graders=CONTRACT_GRADERS)
    return Run.objects.get(pk=run.pk)


def decision_of(run: Run, key: str) -> str:
    trial = Trial.objects.get(run=run, case__key=key)
    return run_decisions(run=Run.objects.get(pk=run.pk)).trials[trial.id].decision


def test_the_review_queue_holds_exactly_the_review_trials(graded, carol):
    cset = review_set_create(run=graded, by=carol)
    keys = list(cset.items.order_by("position").values_list("trial__case__key", flat=True))
    assert sorted(keys) == [
        "contradictory_description",
        "correct",
        "invented_requirement",
        "reordered",
    ]
    assert review_dimensions(cset) == list(REVIEW_DIMENSIONS)


def test_all_dimensions_passed_accepts_and_a_changed_output_does_not_inherit_it(graded, carol, bob):
    cset = review_set_create(run=graded, by=carol)
    trial = Trial.objects.get(run=graded, case__key="correct")
    label = review_submit(
        calibration_set=cset,
        trial=trial,
        reviewer=bob,
        dimensions=ALL_PASS,
        reviewed_hash=output_hash(trial.output),
    )
    assert label.verdict == "pass"
    assert decision_of(graded, "correct") == "accepted"
    counts = run_decisions(run=Run.objects.get(pk=graded.pk)).counts
    assert (counts["accepted"], counts["review"], counts["rejected"]) == (1, 3, 8)
    Trial.objects.filter(pk=trial.pk).update(output=trial.output + " ")
    assert decision_of(graded, "correct") == "review"


def test_one_failed_dimension_or_a_disagreement_keeps_it_in_review(graded, carol, bob, alice):
    cset = review_set_create(run=graded, by=carol)
    trial = Trial.objects.get(run=graded, case__key="contradictory_description")
    h = output_hash(trial.output)
    failing = {
        **ALL_PASS,
        "description_assertion_consistency": {
            "verdict": "fail",
            "critique": "T-600 says approval is needed; approvalRequired is false",
        },
    }
    label = review_submit(
        calibration_set=cset, trial=trial, reviewer=bob, dimensions=failing, reviewed_hash=h
    )
    assert label.verdict == "fail"
    assert decision_of(graded, "contradictory_description") == "review"
    other = Trial.objects.get(run=graded, case__key="reordered")
    h2 = output_hash(other.output)
    review_submit(
        calibration_set=cset, trial=other, reviewer=bob, dimensions=ALL_PASS, reviewed_hash=h2
    )
    review_submit(
        calibration_set=cset, trial=other, reviewer=alice, dimensions=failing, reviewed_hash=h2
    )
    assert decision_of(graded, "reordered") == "review"


def test_refusals_name_the_field(graded, carol, bob, mallory):
    cset = review_set_create(run=graded, by=carol)
    trial = Trial.objects.get(run=graded, case__key="correct")
    h = output_hash(trial.output)

    def submit(dimensions, reviewed_hash=h, reviewer=bob):
        review_submit(
            calibration_set=cset,
            trial=trial,
            reviewer=reviewer,
            dimensions=dimensions,
            reviewed_hash=reviewed_hash,
        )

    cases = [
        (
            {k: v for k, v in ALL_PASS.items() if k != "reviewer_clarity"},
            h,
            "dimensions.reviewer_clarity",
        ),
        ({**ALL_PASS, "reviewer_clarity": {"verdict": "PASS"}}, h, "dimensions.reviewer_clarity"),
        (
            {**ALL_PASS, "reviewer_clarity": {"verdict": "fail", "critique": " "}},
            h,
            "dimensions.reviewer_clarity.critique",
        ),
        ({**ALL_PASS, "tone": {"verdict": "pass"}}, h, "dimensions.tone"),
        (ALL_PASS, "0" * 64, "output_hash"),
    ]
    for dimensions, reviewed_hash, field in cases:
        with pytest.raises(DomainError) as caught:
            submit(dimensions, reviewed_hash)
        assert caught.value.field == field
    with pytest.raises(PermissionDenied):
        submit(ALL_PASS, reviewer=mallory)
    with pytest.raises(PermissionDenied):
        review_set_create(run=graded, by=bob)
    assert decision_of(graded, "correct") == "review"


def test_the_review_pages_round_trip_without_htmx(graded, carol, bob):
    client = Client()
    client.force_login(carol)
    response = client.post(f"/runs/{graded.uuid}/review/")
    assert response.status_code == 302
    cset = CalibrationSet.objects.get(run=graded)
    assert response["Location"] == f"/calibration-sets/{cset.uuid}/"
    assert client.get(response["Location"]).status_code == 200
    client.force_login(bob)
    page = client.get(f"/calibration-sets/{cset.uuid}/label/").content.decode()
    assert 'id="review-form"' in page
    trial = cset.items.order_by("position").first().trial
    assert output_hash(trial.output) in page
    body = {"trial": str(trial.uuid), "output_hash": output_hash(trial.output)}
    refused = client.post(f"/calibration-sets/{cset.uuid}/review/save/", body)
    assert refused.status_code == 400
    assert "Not saved: dimensions.description_assertion_consistency: answer pass or fail" in (
        refused.content.decode()
    )
    body.update({f"verdict-{d}": "pass" for d in REVIEW_DIMENSIONS})
    saved = client.post(f"/calibration-sets/{cset.uuid}/review/save/", body)
    assert saved.status_code == 302
    assert decision_of(graded, trial.case.key) == "accepted"
    stale = client.post(
        f"/calibration-sets/{cset.uuid}/review/save/", {**body, "output_hash": "0" * 64}
    )
    assert stale.status_code == 409


def _first_item_as(user, *, graded, by):
    """(review set of ``graded`` made by ``by``, its first trial, a client logged in as
    ``user``)."""
    cset = review_set_create(run=graded, by=by)
    client = Client()
    client.force_login(user)
    return cset, cset.items.order_by("position").first().trial, client


@pytest.mark.parametrize("htmx", [False, True])
def test_a_critique_holding_a_nul_comes_back_on_its_dimension_and_nothing_is_saved(
    graded, carol, bob, htmx
):
    cset, trial, client = _first_item_as(bob, graded=graded, by=carol)
    failing, *passing = REVIEW_DIMENSIONS
    body = {
        "trial": str(trial.uuid),
        "output_hash": output_hash(trial.output),
        f"verdict-{failing}": "fail",
        f"critique-{failing}": "made\x00 up",
        **{f"verdict-{d}": "pass" for d in passing},
    }
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.post(f"/calibration-sets/{cset.uuid}/review/save/", body, **headers)
    page = response.content.decode()
    assert response.status_code == 200
    assert f"critique-{failing}: {UNSTORABLE}; nothing was saved" in page
    assert "made\ufffd up</textarea>" in page and "\x00" not in page
    assert f'name="verdict-{failing}" value="fail" required checked' in page
    assert page.count('value="pass" required checked') == len(passing)
    assert f'name="trial" value="{trial.uuid}"' in page
    assert not trial.labels.exists()


def test_a_refused_review_keeps_what_was_typed(graded, carol, bob):
    cset, trial, client = _first_item_as(bob, graded=graded, by=carol)
    failing, *passing = REVIEW_DIMENSIONS
    body = {
        "trial": str(trial.uuid),
        "output_hash": output_hash(trial.output),
        f"critique-{failing}": "TYPED-BEFORE-CHOOSING",
        **{f"verdict-{d}": "pass" for d in passing},
    }
    response = client.post(f"/calibration-sets/{cset.uuid}/review/save/", body)
    page = response.content.decode()
    assert response.status_code == 400
    assert f"Not saved: dimensions.{failing}: answer pass or fail" in page
    assert "TYPED-BEFORE-CHOOSING</textarea>" in page
    assert not trial.labels.exists()
