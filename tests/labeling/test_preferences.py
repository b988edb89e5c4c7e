"""Reviewers label preferences (A / B / tie) on a pairwise judge run's pairs, keyboard-first
and blind to the judge (issue 12, point 5); a tie has no preference to agree with."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from core.text import UNSTORABLE
from evals.models import Case, Run, Suite, Trial
from judges import runs
from labeling.models import PreferenceLabel, PreferenceOrder
from labeling.pairwise import pairwise_calibration_compute
from tests.conftest import PASSWORD, _user
from tests.fakellm import FakeLLM
from tests.judge_builders import fenced, make_version, verdict_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def judge_run(django_capture_on_commit_callbacks):
    suite = Suite.objects.create(name="S")
    outputs = {"BASERUN": ["Berlin one", "Paris two"], "HEADRUN": ["Paris one", "Rome two"]}
    made = {}
    for name, texts in outputs.items():
        made[name] = Run.objects.create(
            suite=suite, name=name, target_kind="callable", status=Run.Status.SUCCEEDED
        )
        for i, text in enumerate(texts):
            case, _ = Case.objects.get_or_create(suite=suite, key=f"c{i}", defaults={"input": "q"})
            Trial.objects.create(run=made[name], case=case, attempt=1, status="ok", output=text)

    def prefers_paris(body):
        a, b = fenced(body)[1:3]
        return verdict_json("A" if "Paris" in a else "B", reasoning="JUDGE-REASONING")

    with FakeLLM(responder=prefers_paris) as llm:
        version = make_version(llm, kind="pairwise")
        with django_capture_on_commit_callbacks(execute=True):
            jr = runs.pairwise_judge_run_start(
                base=made["BASERUN"], head=made["HEADRUN"], judge_version=version
            )
    jr.refresh_from_db()
    assert jr.status == "succeeded"
    # Shown in the pair's own order (base as A), so a choice on screen is the stored one;
    # the balanced draw is tested in test_preference_order.py.
    PreferenceOrder.objects.bulk_create(
        PreferenceOrder(pair_id=pid, swapped=False) for pid in jr.trial_ids
    )
    return jr


def test_a_reviewer_labels_each_pair_blind_and_a_tie_is_left_out_of_agreement(
    client, alice, bob, judge_run
):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    assert client.login(username=bob.username, password=PASSWORD)
    page = client.get(url).content.decode()
    assert "Berlin one" in page and "Paris one" in page and "pair 1 of 2" in page
    for hidden in ("JUDGE-REASONING", "chose slot", "HEADRUN", "BASERUN", "prefers"):
        assert hidden not in page
    assert 'value="A"' in page and 'value="tie"' in page and "js/labeling.js" in page
    response = client.post(
        url,
        {"pair": judge_run.trial_ids[0], "verdict": "B", "critique": " x ", "expected_version": 0},
    )
    assert response.status_code == 302
    first = PreferenceLabel.objects.get()
    assert (first.preferred, first.critique, first.reviewer) == ("B", "x", bob)
    page = client.get(url).content.decode()
    assert "Paris two" in page and "Rome two" in page and "labeled 1 of 2" in page
    client.post(url, {"pair": judge_run.trial_ids[1], "verdict": "tie", "expected_version": 0})
    assert "Every pair of this judge run has your preference" in client.get(url).content.decode()

    cal = pairwise_calibration_compute(judge_version=judge_run.judge_version)
    # Pair 1: the judge prefers the head's Paris in both orders (B), as the reviewer did.
    # Pair 2: consistent (base's Paris, A), but the reviewer saw no preference: left out.
    assert (cal.n, cal.agreement_numerator, cal.n_human_ties) == (1, 1, 1)
    assert [p.n for p in cal.by_position] == [1, 1]
    assert client.login(username=alice.username, password=PASSWORD)
    page = client.get(
        reverse("labeling:calibration", args=[judge_run.judge_version.uuid])
    ).content.decode()
    assert "1 the humans labeled a tie" in page
    assert "(1/1; 95% Wilson" in page  # the agreement, with its interval


def test_a_preference_is_replaced_refused_outside_the_run_and_engineers_cannot_label(
    client, bob, carol, judge_run
):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    assert client.login(username=bob.username, password=PASSWORD)
    client.post(url, {"pair": judge_run.trial_ids[0], "verdict": "A", "expected_version": 0})
    client.post(url, {"pair": judge_run.trial_ids[0], "verdict": "B", "expected_version": 1})
    assert list(PreferenceLabel.objects.values_list("preferred", flat=True)) == ["B"]
    client.post(url, {"pair": judge_run.trial_ids[1], "verdict": "maybe", "expected_version": 0})
    client.post(url, {"pair": 999999, "verdict": "A", "expected_version": 0})
    assert PreferenceLabel.objects.count() == 1
    assert client.login(username=carol.username, password=PASSWORD)
    assert client.get(url).status_code == 403


def test_preference_labels_export_shows_a_reviewer_only_their_own(client, alice, bob, judge_run):
    """The labels export of a pairwise judge run (dashboard and API): a lead reads every
    reviewer's preference and critique; a reviewer only their own (blind reviewing)."""
    dave = _user("dave", "reviewer")
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    for user, verdict, critique in ((bob, "B", "BOB-NOTE"), (dave, "A", "DAVE-NOTE")):
        assert client.login(username=user.username, password=PASSWORD)
        client.post(
            url,
            {
                "pair": judge_run.trial_ids[0],
                "verdict": verdict,
                "critique": critique,
                "expected_version": 0,
            },
        )
    export = reverse("interop:preferences-export", args=[judge_run.uuid])
    body = client.get(f"{export}?format=csv").content.decode()  # dave is logged in
    assert "DAVE-NOTE" in body and "BOB-NOTE" not in body
    header, *rows = [line for line in body.splitlines() if line]
    assert header == (
        "pair,case_id,reviewer,preferred,preferred_run,shown_first,chose_shown,critique,"
        "source,created_at"
    )
    assert len(rows) == 1 and ",dave,A,base,base,A,DAVE-NOTE,reviewer," in rows[0]
    assert client.login(username=alice.username, password=PASSWORD)
    body = client.get(f"{export}?format=csv").content.decode()
    assert "DAVE-NOTE" in body and "BOB-NOTE" in body
    detail = client.get(reverse("judges:judge-run-detail", args=[judge_run.uuid])).content
    assert b'id="preferences-export-csv"' in detail

    api = APIClient()
    api.force_authenticate(bob)
    response = api.get(f"/api/judge-runs/{judge_run.uuid}/preferences-export?format=csv")
    assert response.status_code == 200
    text = b"".join(response.streaming_content if response.streaming else [response.content])
    assert b"BOB-NOTE" in text and b"DAVE-NOTE" not in text
    assert api.get("/api/judge-runs/not-a-uuid/preferences-export?format=csv").status_code == 404


def test_a_critique_holding_a_nul_comes_back_on_its_pair_and_nothing_is_saved(
    client, bob, judge_run
):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    assert client.login(username=bob.username, password=PASSWORD)
    second = judge_run.trial_ids[1]  # not the next pair: the page shows the one posted
    response = client.post(
        url, {"pair": second, "verdict": "tie", "critique": "both\x00 fine", "expected_version": 0}
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert f"critique: {UNSTORABLE}; nothing was saved" in page
    assert "both\ufffd fine</textarea>" in page and "\x00" not in page
    assert 'value="tie" checked' in page
    assert f'name="pair" value="{second}"' in page and "Rome two" in page
    assert not PreferenceLabel.objects.exists()


def test_a_preference_posted_without_a_choice_keeps_the_critique(client, bob, judge_run):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    assert client.login(username=bob.username, password=PASSWORD)
    response = client.post(
        url, {"pair": judge_run.trial_ids[0], "critique": "KEPT-NOTE", "expected_version": 0}
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "Choose A, B or tie." in page and "KEPT-NOTE</textarea>" in page
    assert not PreferenceLabel.objects.exists()
