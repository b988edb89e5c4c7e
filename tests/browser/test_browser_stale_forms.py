"""Browser tests of stale forms: two tabs of one lead (two browser contexts) on the
adjudication page and on a judge version's trust. The tab that acted first wins; the stale
tab's submit is refused, shows what changed, and keeps what the lead chose and typed, so a
second submit, made knowingly, goes through.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from judges.models import JudgeApproval
from judges.trust import trust_revoke
from labeling.approval import judge_trust_approve
from labeling.labels import label_submit
from labeling.models import Adjudication
from labeling.selectors import reference_labels
from tests.browser.conftest import log_in
from tests.labeling_builders import calibration_set, judged_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


# The refused submit's page is answered 409, which Chromium reports as a console error.
REFUSED = "Failed to load resource: the server responded with a status of 409 (Conflict)"


def _label(trials, reviewer, verdicts) -> None:
    for trial, verdict in zip(trials, verdicts, strict=True):
        label_submit(trial=trial, reviewer=reviewer, verdict=verdict, expected_version=0)


def test_a_stale_adjudication_tab_is_refused_and_keeps_the_choice_and_reason(
    browser_pages, live_server, alice, bob
):
    run, version, trials = judged_run(2, judge_fails=1)
    cset = calibration_set(run, version, trials)
    _label(trials, bob, ["fail", "pass"])
    _label(trials[:1], alice, ["pass"])  # the first trial is disputed
    url = f"{live_server.url}{reverse('labeling:adjudication')}?set={cset.uuid}"
    card = f"#trial-{trials[0].uuid}"
    tab1, tab2 = browser_pages(), browser_pages()
    for tab in (tab1, tab2):
        log_in(tab, live_server, "alice")
        tab.goto(url)
        tab.wait_for_selector(f"{card} .badge.open")

    tab2.check(f"{card} input[name=verdict][value=fail]")
    tab2.fill(f"{card} textarea[name=reason]", "no receipt, no refund")
    tab2.click(f"{card} button[type=submit]")
    tab2.wait_for_selector(f"{card} .badge.fail")

    tab1.check(f"{card} input[name=verdict][value=pass]")
    tab1.fill(f"{card} textarea[name=reason]", "the policy allows it")
    tab1.click(f"{card} button[type=submit]")
    tab1.wait_for_selector(f"{card} .adjudication-conflict")
    assert "changed since you opened it (now fail by alice" in tab1.inner_text(card)
    assert "Decided fail by alice" in tab1.inner_text(f"{card} .decision")
    assert tab1.is_checked(f"{card} input[name=verdict][value=pass]")
    assert tab1.input_value(f"{card} textarea[name=reason]") == "the policy allows it"
    ref = reference_labels(trial_ids=[trials[0].id]).by_trial[trials[0].id]
    assert (ref.verdict, ref.critique) == ("fail", "no receipt, no refund")

    tab1.click(f"{card} button[type=submit]")  # again, now knowing the decision it replaces
    tab1.wait_for_selector(f"{card} .badge.pass")
    assert "Earlier decisions (1)" in tab1.inner_text(card)
    assert list(
        Adjudication.objects.filter(trial=trials[0]).order_by("version").values_list("verdict")
    ) == [("fail",), ("pass",)]
    assert tab1.dialogs == [] and tab1.console_errors == [REFUSED]
    assert tab2.dialogs == [] and tab2.console_errors == []


def test_a_stale_revoke_tab_does_not_revoke_a_newer_approval(
    browser_pages, live_server, alice, bob
):
    run, version, trials = judged_run(60, judge_fails=40)
    cset = calibration_set(run, version, trials)
    _label(trials, bob, ["fail"] * 40 + ["pass"] * 20)
    first = judge_trust_approve(judge_version=version, by=alice, calibration_set=cset)
    url = (
        f"{live_server.url}{reverse('labeling:calibration', kwargs={'version_id': version.uuid})}"
        f"?set={cset.uuid}"
    )
    tab1 = browser_pages()
    log_in(tab1, live_server, "alice")
    tab1.goto(url)
    tab1.wait_for_selector("#revoke-trust")
    # meanwhile (another tab, or another lead): revoked, then approved again
    trust_revoke(judge_version=version, by=alice, reason="audit")
    newer = judge_trust_approve(judge_version=version, by=alice, calibration_set=cset)

    tab1.fill("textarea[name=reason]", "prompt drifted")
    tab1.click("#revoke-trust")
    tab1.wait_for_selector(".revoke-conflict")
    refusal = tab1.inner_text(".revoke-conflict")
    assert "a newer approval exists, by alice at" in refusal and "nothing was revoked" in refusal
    assert tab1.input_value("textarea[name=reason]") == "prompt drifted"
    newer.refresh_from_db()
    assert newer.revoked_at is None

    tab1.click("#revoke-trust")  # again, on the approval it now shows
    tab1.wait_for_selector("text=not trusted (calibrate this version)")
    newer.refresh_from_db()
    assert (newer.revoked_by, newer.revoke_reason) == (alice, "prompt drifted")
    assert JudgeApproval.objects.get(pk=first.pk).revoke_reason == "audit"
    assert tab1.dialogs == [] and tab1.console_errors == [REFUSED]
