"""The lead's adjudication page: trials where reviewers disagree, their verdicts and
critiques (escaped), the decision form; leads only; the decision becomes the reference."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from core.text import UNSTORABLE
from labeling.labels import label_submit
from labeling.models import Adjudication
from labeling.selectors import calibration_compute, reference_labels
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert('x')</script>"


def login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


@pytest.fixture
def disputed(db, alice, bob):
    """6 trials (judge fails c01..c03); bob labels all, alice (a lead can label) labels
    c01 and c02 the other way and c03 the same way: c01 and c02 disagree."""
    run, version, trials = judged_run(6, judge_fails=3)
    cset = calibration_set(run, version, trials)
    bob_says = ["fail", "pass", "fail", "pass", "pass", "pass"]
    for trial, verdict in zip(trials, bob_says, strict=True):
        label_submit(
            trial=trial,
            reviewer=bob,
            verdict=verdict,
            critique=f"bob on {verdict}",
            expected_version=0,
        )
    label_submit(
        trial=trials[0], reviewer=alice, verdict="pass", critique=HOSTILE, expected_version=0
    )
    label_submit(
        trial=trials[1],
        reviewer=alice,
        verdict="fail",
        critique="cites no policy",
        expected_version=0,
    )
    label_submit(
        trial=trials[2], reviewer=alice, verdict="fail", critique="agree", expected_version=0
    )
    return cset, version, trials


def page_url(cset) -> str:
    return reverse("labeling:adjudication") + f"?set={cset.uuid}"


def decide(client, cset, trial, verdict="pass", reason="policy allows it", version=None):
    """Post a decision from a form that showed decision ``version`` (None: the newest)."""
    if version is None:
        version = Adjudication.objects.filter(trial=trial).count()
    return client.post(
        reverse("labeling:adjudication-save"),
        {
            "set": str(cset.uuid),
            "trial": str(trial.uuid),
            "verdict": verdict,
            "reason": reason,
            "expected_version": version,
        },
    )


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 403), ("carol", 403), ("mallory", 403)]
)
def test_only_a_lead_opens_the_adjudication_page(client, disputed, who, status, request):
    login(client, request.getfixturevalue(who))
    assert client.get(page_url(disputed[0])).status_code == status


def test_it_lists_only_the_disagreeing_trials_with_every_verdict_and_critique(
    client, disputed, alice
):
    cset, _, trials = disputed
    login(client, alice)
    html = client.get(page_url(cset)).content.decode()
    assert f'id="trial-{trials[0].uuid}"' in html and f'id="trial-{trials[1].uuid}"' in html
    assert f'id="trial-{trials[2].uuid}"' not in html  # bob and alice agree on c03
    assert f'id="trial-{trials[3].uuid}"' not in html  # one label only
    assert "<strong>2</strong> open of 2 disagreeing trials" in html
    assert "bob on fail" in html and "cites no policy" in html
    assert HOSTILE not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "JUDGE-REASONING" not in html  # the judge's view is not shown to the lead here


def test_a_leads_decision_becomes_the_reference_label(client, disputed, alice):
    cset, version, trials = disputed
    assert calibration_compute(judge_version=version, calibration_set=cset).n_unresolved == 2
    login(client, alice)
    response = decide(client, cset, trials[0], "pass", "the refund policy allows it")
    assert response.status_code == 302 and response.url == page_url(cset)
    ref = reference_labels(trial_ids=[trials[0].id]).by_trial[trials[0].id]
    assert (ref.verdict, ref.basis, ref.critique) == (
        "pass",
        "adjudication",
        "the refund policy allows it",
    )
    assert calibration_compute(judge_version=version, calibration_set=cset).n_unresolved == 1
    html = client.get(page_url(cset)).content.decode()
    assert "<strong>1</strong> open of 2 disagreeing trials" in html
    assert "Decided <strong>pass</strong> by alice" in html


def test_the_newest_decision_wins(client, disputed, alice):
    cset, _, trials = disputed
    login(client, alice)
    decide(client, cset, trials[1], "pass", "first look")
    decide(client, cset, trials[1], "fail", "on reflection it cites nothing")
    ref = reference_labels(trial_ids=[trials[1].id]).by_trial[trials[1].id]
    assert (ref.verdict, ref.critique) == ("fail", "on reflection it cites nothing")
    assert Adjudication.objects.filter(trial=trials[1]).count() == 2


def test_a_form_opened_before_a_newer_decision_cannot_replace_it(client, disputed, alice):
    cset, _, trials = disputed
    login(client, alice)
    assert (
        f'name="expected_version" value="0" id="adj-{trials[0].uuid}'
        in client.get(page_url(cset)).content.decode()
    )  # the form says which decision it was shown: none yet
    other = Client()
    login(other, alice)  # alice's other tab decides first
    assert decide(other, cset, trials[0], "fail", "no refund without a receipt").status_code == 302

    stale = decide(client, cset, trials[0], "pass", "policy allows it", version=0)
    assert stale.status_code == 409
    page = stale.content.decode()
    assert "the decision on this trial changed since you opened it (now fail by alice at" in page
    assert "Decided <strong>fail</strong> by alice" in page  # the decision now, shown
    assert "policy allows it</textarea>" in page  # the lead's reason is kept ...
    assert f'value="pass" required id="adj-{trials[0].uuid}-verdict_0" checked>' in page
    assert f'name="expected_version" value="1" id="adj-{trials[0].uuid}' in page  # ... on v1
    ref = reference_labels(trial_ids=[trials[0].id]).by_trial[trials[0].id]
    assert (ref.verdict, ref.critique) == ("fail", "no refund without a receipt")

    assert decide(client, cset, trials[0], "pass", "policy allows it", version=1).status_code == 302
    assert list(
        Adjudication.objects.filter(trial=trials[0])
        .order_by("version")
        .values_list("version", "verdict", "decided_by__username")
    ) == [(1, "fail", "alice"), (2, "pass", "alice")]
    html = client.get(page_url(cset)).content.decode()
    assert "Earlier decisions (1)" in html and "no refund without a receipt" in html


@pytest.mark.parametrize("who", ["bob", "carol", "mallory"])
def test_it_refuses_a_decision_from_anyone_but_a_lead(client, disputed, who, request):
    cset, _, trials = disputed
    login(client, request.getfixturevalue(who))
    assert decide(client, cset, trials[0]).status_code == 403
    assert not Adjudication.objects.exists()


def test_it_refuses_a_decision_without_a_reason_and_keeps_the_input(client, disputed, alice):
    cset, _, trials = disputed
    login(client, alice)
    response = decide(client, cset, trials[0], "fail", "")
    assert response.status_code == 400
    assert "Give the reason for the decision." in response.content.decode()
    assert not Adjudication.objects.exists()


def test_it_scopes_the_page_to_a_suite(client, disputed, alice):
    cset, _, trials = disputed
    login(client, alice)
    html = client.get(
        reverse("labeling:adjudication") + f"?suite={cset.suite.uuid}"
    ).content.decode()
    assert f'id="trial-{trials[0].uuid}"' in html and "suite support" in html


def test_the_calibration_page_links_the_lead_to_adjudication(client, disputed, alice, carol):
    cset, version, _ = disputed
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid}) + f"?set={cset.uuid}"
    login(client, alice)
    html = client.get(url).content.decode()
    assert f'href="{page_url(cset)}"' in html and "Adjudicate the 2 disagreements" in html
    client.logout()
    login(client, carol)  # engineers see the calibration page, not the adjudication link
    html = client.get(url).content.decode()
    assert reverse("labeling:adjudication") not in html


def test_a_nul_in_the_reason_comes_back_on_the_field_with_the_text_kept(client, disputed, alice):
    cset, _, trials = disputed
    login(client, alice)
    response = decide(client, cset, trials[0], "fail", "policy\x00 says no")
    page = response.content.decode()
    assert response.status_code == 400
    assert f"reason: {UNSTORABLE}; nothing was saved" in page
    assert "policy\ufffd says no</textarea>" in page and "\x00" not in page
    assert not Adjudication.objects.exists()
