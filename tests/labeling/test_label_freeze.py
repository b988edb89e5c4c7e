"""Finish, look, revise: once a reviewer has labeled every item of a set, the judge's
verdicts are visible to them, so their labels there are frozen. A later change is kept as a
flagged revision, the blind label stays the label of record, and calibration counts the
revisions apart."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.labels import label_submit
from labeling.models import Label, LabelRevision
from labeling.selectors import calibration_compute
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def finished(bob):
    """A set of 3 (the judge fails the first trial) that bob has labeled "pass" throughout;
    before finishing, he revised the first label freely."""
    run, version, trials = judged_run(3, judge_fails=1)
    cset = calibration_set(run, version, trials)
    label_submit(trial=trials[0], reviewer=bob, verdict="fail")
    assert label_submit(trial=trials[0], reviewer=bob, verdict="pass").outcome == "revised"
    for trial in trials[1:]:
        label_submit(trial=trial, reviewer=bob, verdict="pass")
    return cset, version, trials


def test_a_change_after_finishing_is_a_flagged_revision_and_calibration_keeps_the_blind_label(
    client, alice, bob, finished
):
    cset, version, trials = finished
    label = label_submit(trial=trials[0], reviewer=bob, verdict="fail", critique="saw it")
    assert label.outcome == "flagged"
    stored = Label.objects.get(trial=trials[0], reviewer=bob)
    assert (stored.verdict, stored.critique) == ("pass", "")  # the label of record
    flagged = LabelRevision.objects.get(after_reveal=True)
    assert (flagged.reviewer, flagged.verdict, flagged.critique) == (bob, "fail", "saw it")
    assert flagged.version == stored.version  # the form's next version moved on
    assert label_submit(
        trial=trials[0], reviewer=bob, verdict="fail", critique="saw it"
    ).outcome == ("unchanged")

    cal = calibration_compute(judge_version=version, calibration_set=cset)
    assert cal.confusion.judge_fail_human_pass == 1  # bob's blind pass, not his fail
    assert cal.confusion.judge_fail_human_fail == 0

    client.force_login(alice)
    url = reverse("labeling:calibration", args=[version.uuid]) + f"?set={cset.uuid}"
    assert "1 label revised after the reviewer saw the judge" in client.get(url).content.decode()
    api = APIClient()
    api.force_authenticate(alice)
    figures = api.get(f"/api/calibration-sets/{cset.uuid}/").json()["calibration"]
    assert figures["labels_revised_after_reveal"] == 1
    export = client.get(reverse("interop:set-export", args=[cset.uuid]) + "?format=csv")
    first = next(csv.DictReader(io.StringIO(export.content.decode(), newline="")))
    assert (first["label.bob.verdict"], first["label.bob.revised_after_reveal"]) == (
        "pass",
        "fail",
    )


def test_the_queue_and_the_api_say_the_label_is_frozen_and_undo_is_refused(client, bob, finished):
    cset, _, trials = finished
    client.force_login(bob)
    queue = reverse("labeling:queue", args=[cset.uuid])
    assert 'id="queue-done-frozen"' in client.get(queue).content.decode()
    page = client.get(f"{queue}?trial={trials[0].uuid}").content.decode()
    assert 'id="queue-frozen"' in page and "your label of record: pass" in page
    label = Label.objects.get(trial=trials[0], reviewer=bob)
    saved = client.post(
        reverse("labeling:label-save", args=[cset.uuid]),
        {"trial": trials[0].uuid, "verdict": "fail", "expected_version": label.version},
        **HTMX,
    ).content.decode()
    assert "Your label of record stays pass" in saved
    undo = client.post(reverse("labeling:label-undo", args=[cset.uuid]), **HTMX)
    assert "cannot be undone" in undo.content.decode()

    api = APIClient()
    api.force_authenticate(bob)
    response = api.post(
        "/api/labels", {"trial": str(trials[1].uuid), "verdict": "fail"}, format="json"
    )
    body = response.json()
    assert response.status_code == 200 and body["outcome"] == "flagged"
    assert body["verdict"] == "pass" and body["revision_after_reveal"]["verdict"] == "fail"
    assert "frozen" in body["frozen_detail"]
    undo = api.post("/api/labels/undo", {"trial": str(trials[1].uuid)}, format="json")
    assert undo.status_code == 409
    assert Label.objects.filter(reviewer=bob, verdict="pass").count() == 3


def test_a_lead_who_sees_every_verdict_anyway_is_never_frozen(alice, finished):
    _, _, trials = finished
    for trial in trials:
        label_submit(trial=trial, reviewer=alice, verdict="pass")
    assert label_submit(trial=trials[0], reviewer=alice, verdict="fail").outcome == "revised"
    assert Label.objects.get(trial=trials[0], reviewer=alice).verdict == "fail"
