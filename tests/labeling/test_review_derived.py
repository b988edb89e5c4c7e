"""A contract trial's acceptance is derived from the labels of record: an undo or a relabel
takes it back, on every path, and each move is in the trial's decision history."""

from __future__ import annotations

import pytest
from django.test import Client

from evals.grading.contract.decisions import decision_history, output_hash, trial_decision_get
from evals.models import Trial
from labeling.labels import label_undo
from labeling.review import review_set_create, review_submit
from tests.core.test_api_core import client_for
from tests.labeling.test_review import ALL_PASS, graded  # noqa: F401 - the fixture

ONE_FAIL = {
    **ALL_PASS,
    "reviewer_clarity": {"verdict": "fail", "critique": "T-NR reads as the approval rule"},
}


@pytest.fixture
def reviewed(graded, carol):  # noqa: F811 - the fixture imported above
    cset = review_set_create(run=graded, by=carol)
    trial = Trial.objects.get(run=graded, case__key="correct")
    return cset, trial


def _review(cset, trial, reviewer, dimensions):
    return review_submit(
        calibration_set=cset,
        trial=trial,
        reviewer=reviewer,
        dimensions=dimensions,
        reviewed_hash=output_hash(trial.output),
    )


def _moves(trial) -> list[tuple[str, str, str]]:
    return [
        (t.from_decision, t.to_decision, t.cause)
        for t in decision_history(trial_ids=[trial.id]).get(trial.id, [])
    ]


def test_an_undo_of_the_passing_revision_takes_the_acceptance_back(reviewed, bob):
    cset, trial = reviewed
    _review(cset, trial, bob, ONE_FAIL)
    _review(cset, trial, bob, ALL_PASS)
    assert trial_decision_get(trial_id=trial.id) == "accepted"
    label = label_undo(trial=trial, reviewer=bob)
    assert label.verdict == "fail"
    assert label.details["contract_review"]["dimensions"]["reviewer_clarity"]["verdict"] == "fail"
    assert trial_decision_get(trial_id=trial.id) == "review"
    assert _moves(trial) == [("review", "accepted", "revised"), ("accepted", "review", "undo")]
    label_undo(trial=trial, reviewer=bob)  # clears the first review
    assert trial_decision_get(trial_id=trial.id) == "review"


def test_a_relabel_to_fail_through_the_api_takes_the_acceptance_back(reviewed, bob, carol):
    cset, trial = reviewed
    _review(cset, trial, bob, ALL_PASS)
    assert trial_decision_get(trial_id=trial.id) == "accepted"
    response = client_for(bob).post(
        "/api/labels",
        {"trial": str(trial.uuid), "verdict": "fail", "critique": "not clear after all"},
        format="json",
    )
    assert response.status_code == 200
    assert trial_decision_get(trial_id=trial.id) == "review"
    history = decision_history(trial_ids=[trial.id])[trial.id]
    assert [(t.to_decision, t.reviewer_name, t.cause) for t in history] == [
        ("accepted", "bob", "created"),
        ("review", "bob", "revised"),
    ]
    assert history[-1].label_version == 2
    detail = client_for(carol).get(f"/api/trials/{trial.uuid}/").json()
    assert detail["decision"] == "review"
    assert [(m["from"], m["to"], m["cause"]) for m in detail["decision_history"]] == [
        ("review", "accepted", "created"),
        ("accepted", "review", "revised"),
    ]


def test_a_relabel_to_pass_without_a_review_does_not_accept(reviewed, bob):
    cset, trial = reviewed
    _review(cset, trial, bob, ONE_FAIL)
    response = client_for(bob).post(
        "/api/labels",
        {"trial": str(trial.uuid), "verdict": "pass", "critique": "fine"},
        format="json",
    )
    assert response.status_code == 200
    assert trial_decision_get(trial_id=trial.id) == "review"
    assert _moves(trial) == []


def test_the_trial_page_shows_the_decision_history(reviewed, bob, carol):
    cset, trial = reviewed
    _review(cset, trial, bob, ALL_PASS)
    label_undo(trial=trial, reviewer=bob)
    client = Client()
    client.force_login(carol)
    page = client.get(f"/trials/{trial.uuid}/").content.decode()
    assert "Decision history" in page
    assert "review → accepted" in page
    assert "accepted → review" in page
    assert "bob's label, version 2 (undo)" in page
