"""The judges list, the calibration page and the lead's approval: permissions per the cast,
the figures with honest undefined states, escaping, approve and revoke."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from core.text import UNSTORABLE
from evals.models import Grade
from judges.models import JudgeApproval, JudgeVersion
from labeling.labels import label_submit
from labeling.selectors import calibration_compute
from tests.conftest import PASSWORD
from tests.import_helpers import PAIR_TEMPLATE, import_bytes, jsonl, record
from tests.labeling_builders import calibration_set, judged_run
from tests.page_text import shows_word

HOSTILE_CRITIQUE = "<img src=x onerror=alert(1)>"
HOSTILE_REASON = 'x" onmouseover="alert(document.domain)<script>alert(5)</script>'


def login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def label_all(trials, reviewer, humans: list[str], critique: str = "") -> None:
    for trial, verdict in zip(trials, humans, strict=True):
        label_submit(
            trial=trial, reviewer=reviewer, verdict=verdict, critique=critique, expected_version=0
        )


@pytest.fixture
def calibrated(db, bob):
    """40 trials: the judge fails 1..20 and passes 21..40; bob fails 1..21 (so trial 21 is
    a false accept) and passes 22..40. n = 40, FAR 1/21, FRR 0/19, agreement 39/40."""
    run, version, trials = judged_run(40, judge_fails=20)
    cset = calibration_set(run, version, trials)
    label_all(trials, bob, ["fail"] * 21 + ["pass"] * 19, critique="looked at it")
    return cset, version, trials


@pytest.fixture
def trustworthy(db, bob):
    """60 trials: the judge fails 1..40 and passes 41..60 and bob agrees on every one:
    FAR 0/40 (Wilson upper bound 8.8% <= 10%, 40 >= 35 human fails), kappa 1."""
    run, version, trials = judged_run(60, judge_fails=40)
    cset = calibration_set(run, version, trials)
    label_all(trials, bob, ["fail"] * 40 + ["pass"] * 20, critique="looked at it")
    return cset, version, trials


def calibration_url(version, cset=None) -> str:
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    return f"{url}?set={cset.uuid}" if cset else url


def approve(client, version, cset, page_figures):
    c = page_figures.confusion
    return client.post(
        reverse("labeling:trust-approve", kwargs={"version_id": version.uuid}),
        {
            "calibration_set": str(cset.uuid) if cset else "",
            "n": page_figures.n,
            "n_judge_errors": page_figures.n_judge_errors,
            "judge_pass_human_pass": c.judge_pass_human_pass,
            "judge_pass_human_fail": c.judge_pass_human_fail,
            "judge_fail_human_pass": c.judge_fail_human_pass,
            "judge_fail_human_fail": c.judge_fail_human_fail,
        },
        follow=True,
    )


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 403), ("carol", 200), ("mallory", 403)]
)
def test_leads_and_engineers_see_the_judges_and_calibration_pages_and_reviewers_do_not(
    client, calibrated, alice, bob, carol, mallory, who, status
):
    cset, version, _ = calibrated
    login(client, {"alice": alice, "bob": bob, "carol": carol, "mallory": mallory}[who])
    assert client.get(reverse("judges:judge-list")).status_code == status
    assert client.get(calibration_url(version, cset)).status_code == status
    assert client.get(calibration_url(version)).status_code == status


def test_the_calibration_page_shows_the_figures_with_intervals(client, calibrated, alice):
    cset, version, _ = calibrated
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert '<dd id="fig-n">40</dd>' in html
    assert '<strong>97.5%</strong> <span class="muted">(39/40)</span>' in html
    assert '<strong>4.8%</strong> <span class="muted">(1/21; 95% Wilson 0.8%–22.7%)' in html
    assert '<strong>0.0%</strong> <span class="muted">(0/19; 95% Wilson 0.0%–16.8%)' in html
    assert '<strong>0.950</strong> <span class="muted">(95% CI' in html
    assert '<td class="num">1 <span class="muted">false accepts</span></td>' in html
    assert not shows_word(html, "nan")
    # FAR 4.8% meets 10% as a point, but the rule is on the bound: 22.7% > 10%.
    assert 'id="mark-trusted" disabled' in html
    assert (
        '<tr id="check-far_upper"><td>upper 95% bound of the false-accept rate (sample, '
        'Wilson)</td>\n            <td class="num">22.7%</td>\n            '
        '<td class="num">&lt;= 10.0%</td>\n            <td><span class="badge fail">no</span>'
    ) in html
    assert '<td class="num">21</td>\n            <td class="num">&gt;= 35</td>' in html
    assert "no sampling weights" in html  # a hand-made set: the sample figures only


def test_the_page_enables_approval_when_every_bound_holds(client, trustworthy, alice):
    cset, version, _ = trustworthy
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert 'id="mark-trusted" >' in html or 'id="mark-trusted">' in html  # enabled
    assert html.count('<span class="badge pass">yes</span>') == 4


def test_the_page_shows_one_class_kappa_as_undefined_never_nan(client, alice, bob):
    run, version, trials = judged_run(30, judge_fails=0)
    cset = calibration_set(run, version, trials)
    label_all(trials, bob, ["pass"] * 30)
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert "undefined (only one class in the labels)" in html
    assert "undefined (no human fails)" in html
    assert "Warning: the set contains no human fails" in html
    assert not shows_word(html, "nan")
    assert 'id="mark-trusted" disabled' in html


def test_disagreements_show_the_human_critique_beside_the_judge_reasoning_escaped(
    client, alice, bob
):
    run, version, trials = judged_run(2, judge_fails=0)
    Grade.objects.filter(trial=trials[0]).update(reason=HOSTILE_REASON)
    cset = calibration_set(run, version, trials)
    label_all(trials, bob, ["fail", "pass"], critique=HOSTILE_CRITIQUE)
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(5)&lt;/script&gt;" in html
    assert HOSTILE_CRITIQUE not in html
    assert "<script>alert(5)" not in html
    assert "Warning: n = 2 is below 30" in html


def test_errored_judge_verdicts_are_counted_apart(client, calibrated, alice):
    cset, version, trials = calibrated
    Grade.objects.filter(trial=trials[39]).update(status=Grade.Status.ERROR, passed=None)
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert '<dd id="fig-n">39</dd>' in html
    assert "1 judge error " in html


def test_two_reviewers_give_the_human_ceiling(client, calibrated, alice, bob):
    cset, version, trials = calibrated
    label_all(trials[:10], alice, ["fail"] * 9 + ["pass"])
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert "10 trials labeled by two or more reviewers (10 rater pairs): agreement 90.0%" in html


def test_a_lead_marks_a_judge_trusted_when_the_thresholds_hold(client, trustworthy, alice):

    cset, version, _ = trustworthy
    login(client, alice)
    figures = calibration_compute(judge_version=version, calibration_set=cset)
    response = approve(client, version, cset, figures)
    html = response.content.decode()
    approval = JudgeApproval.objects.get(judge_version=version)
    assert approval.approved_by == alice
    assert approval.figures["n"] == 60
    assert approval.figures["far"]["numerator"] == 0
    version.refresh_from_db()
    assert version.is_trusted
    assert "is trusted." in html
    assert "approved by alice" in html
    assert 'id="revoke-trust"' in html


@pytest.mark.parametrize("who", ["bob", "carol", "mallory"])
def test_nobody_but_a_lead_may_approve(client, calibrated, bob, carol, mallory, who):

    cset, version, _ = calibrated
    login(client, {"bob": bob, "carol": carol, "mallory": mallory}[who])
    figures = calibration_compute(judge_version=version, calibration_set=cset)
    assert approve(client, version, cset, figures).status_code == 403
    assert not JudgeApproval.objects.exists()


def test_a_lead_cannot_approve_when_the_thresholds_fail(client, alice, bob):

    run, version, trials = judged_run(20, judge_fails=10)
    cset = calibration_set(run, version, trials)
    label_all(trials, bob, ["fail"] * 10 + ["pass"] * 10)
    login(client, alice)
    html = client.get(calibration_url(version, cset)).content.decode()
    assert 'id="mark-trusted" disabled' in html
    assert "n (compared trials): 20 is below 30" in html
    figures = calibration_compute(judge_version=version, calibration_set=cset)
    html = approve(client, version, cset, figures).content.decode()
    assert "Not approved: thresholds not met: n (compared trials): 20 is below 30" in html
    assert not JudgeApproval.objects.exists()


def test_an_approval_on_figures_that_changed_since_the_page_loaded_is_refused(
    client, calibrated, alice
):

    cset, version, trials = calibrated
    login(client, alice)
    shown = calibration_compute(judge_version=version, calibration_set=cset)
    Grade.objects.filter(trial=trials[0]).update(status=Grade.Status.ERROR, passed=None)
    html = approve(client, version, cset, shown).content.decode()
    assert "the calibration changed since the page was loaded" in html
    assert not JudgeApproval.objects.exists()


def test_revoking_trust_needs_a_reason(client, trustworthy, alice):

    cset, version, _ = trustworthy
    login(client, alice)
    approve(client, version, cset, calibration_compute(judge_version=version, calibration_set=cset))
    url = reverse("labeling:trust-revoke", kwargs={"version_id": version.uuid})
    response = client.post(url, {"reason": "  ", "set": str(cset.uuid)})
    assert response.status_code == 200  # the calibration page again, the error on the reason
    assert '<p class="error revoke-error">Give a reason for revoking trust.</p>' in (
        response.content.decode()
    )
    version.refresh_from_db()
    assert version.is_trusted
    response = client.post(url, {"reason": "drifted\x00", "set": str(cset.uuid)})
    html = response.content.decode()
    assert response.status_code == 200
    assert f"reason: {UNSTORABLE}; nothing was saved" in html
    assert "drifted\ufffd</textarea>" in html and "\x00" not in html
    assert response.context["cset"] == cset  # the scope the page was on
    version.refresh_from_db()
    assert version.is_trusted
    approval = JudgeApproval.objects.get(judge_version=version)
    page = client.get(calibration_url(version, cset)).content.decode()
    assert f'name="approval" value="{approval.uuid}"' in page  # the form names what it revokes
    html = client.post(
        url,
        {"reason": "prompt drifted", "set": str(cset.uuid), "approval": str(approval.uuid)},
        follow=True,
    ).content.decode()
    version.refresh_from_db()
    assert not version.is_trusted
    approval.refresh_from_db()
    assert (approval.revoke_reason, approval.revoked_by) == ("prompt drifted", alice)
    assert "not trusted (calibrate this version)" in html


def test_a_stale_revoke_form_does_not_revoke_a_newer_approval(client, trustworthy, alice):
    cset, version, _ = trustworthy
    login(client, alice)
    approve(client, version, cset, calibration_compute(judge_version=version, calibration_set=cset))
    first = JudgeApproval.objects.get(judge_version=version)
    url = reverse("labeling:trust-revoke", kwargs={"version_id": version.uuid})
    seen = {"reason": "drifted", "set": str(cset.uuid), "approval": str(first.uuid)}
    other = Client()  # alice's other tab: revokes, then approves again
    login(other, alice)
    assert other.post(url, {**seen, "reason": "audit"}).status_code == 302
    approve(other, version, cset, calibration_compute(judge_version=version, calibration_set=cset))
    newer = JudgeApproval.objects.get(judge_version=version, revoked_at__isnull=True)

    response = client.post(url, seen)  # the first tab still shows the first approval
    html = response.content.decode()
    assert response.status_code == 409
    assert "the approval you saw was revoked by alice at" in html
    assert "a newer approval exists, by alice at" in html and "nothing was revoked" in html
    assert "drifted</textarea>" in html  # the reason is kept, the form on the newer approval
    assert f'name="approval" value="{newer.uuid}"' in html
    newer.refresh_from_db()
    assert newer.revoked_at is None
    assert client.post(url, {**seen, "approval": str(newer.uuid)}).status_code == 302
    newer.refresh_from_db()
    assert (newer.revoked_by, newer.revoke_reason) == (alice, "drifted")


def test_a_reviewer_cannot_revoke(client, calibrated, bob):
    cset, version, _ = calibrated
    login(client, bob)
    url = reverse("labeling:trust-revoke", kwargs={"version_id": version.uuid})
    assert client.post(url, {"reason": "no"}).status_code == 403


def test_a_new_version_is_not_trusted_and_offers_calibration(client, trustworthy, alice):

    cset, version, _ = trustworthy
    login(client, alice)
    approve(client, version, cset, calibration_compute(judge_version=version, calibration_set=cset))
    v2 = JudgeVersion.objects.create(
        judge=version.judge, number=2, model="judge-model-2", protocol="p1"
    )
    html = client.get(calibration_url(v2)).content.decode()
    assert "not trusted (calibrate this version)" in html
    assert f"{reverse('labeling:set-new')}?judge_version={v2.uuid}" in html
    assert "trust is never inherited" in html
    listing = client.get(reverse("judges:judge-list")).content.decode()
    assert listing.count('badge pass">trusted') == 1
    assert "calibrate this version" in listing


def test_the_suite_scope_shows_figures_but_approves_elsewhere(client, calibrated, alice):
    cset, version, _ = calibrated
    login(client, alice)
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    html = client.get(f"{url}?suite={cset.suite.uuid}").content.decode()
    assert '<dd id="fig-n">40</dd>' in html
    assert 'id="mark-trusted"' not in html


def test_an_imported_pairwise_judge_gets_pairwise_figures_not_an_empty_pointwise_page(
    client, alice
):

    consistent = [
        {**PAIR_TEMPLATE["judge_labels"][0], "value": "A"},
        {**PAIR_TEMPLATE["judge_labels"][1], "value": "A"},
    ]
    import_bytes(
        jsonl(
            [
                record(PAIR_TEMPLATE, id="p1"),  # original -> A, swapped -> B: inconsistent
                record(PAIR_TEMPLATE, id="p2", judge_labels=consistent),  # A both ways, human A
            ]
        )
    )
    version = JudgeVersion.objects.get()
    client.force_login(alice)
    body = client.get(f"/judge-versions/{version.uuid}/calibration/").content.decode()
    assert "Position consistency" in body
    assert 'id="fig-n">1<' in body  # one order-consistent pair with a human preference
