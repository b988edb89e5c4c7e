"""Browser tests: a stale guidelines tab is refused with the current text shown and its own
text kept (two users, two contexts); the preference queue keeps the choice and critique
across an expired session and saves them after login, as the pass/fail queue does.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from django.urls import reverse

from labeling.models import CalibrationSet, PreferenceLabel
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run, pairwise_judge_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _script_errors(page) -> list[str]:
    """The page's errors other than the expected answers it logs (the stale form's 409, the
    expired session's 401)."""
    expected = ("status of 409", "status of 401", "Response Status Error Code 401")
    return [e for e in page.console_errors if not any(x in e for x in expected)]


def test_a_stale_guidelines_tab_is_refused_showing_the_current_text_and_keeping_its_own(
    browser_pages, live_server, alice, carol
):
    run, version, trials = judged_run(2)
    cset = calibration_set(run, version, trials)
    url = live_server.url + reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})
    tabs = {}
    for who in ("carol", "alice"):
        tabs[who] = browser_pages()
        log_in(tabs[who], live_server, who)
        tabs[who].goto(url)
        tabs[who].fill("#id_instructions", f"Rule by {who.upper()}")

    tabs["carol"].click("#guidelines-form button[type=submit]")
    tabs["carol"].wait_for_selector("text=Guidelines saved.")
    stale = tabs["alice"]
    stale.click("#guidelines-form button[type=submit]")
    stale.wait_for_selector("#guidelines-conflict")
    assert stale.inner_text("#guidelines-current") == "Rule by CAROL"
    assert stale.input_value("#id_instructions") == "Rule by ALICE"  # nothing lost
    cset.refresh_from_db()
    assert (cset.instructions, cset.instructions_version) == ("Rule by CAROL", 1)

    stale.click("#guidelines-form button[type=submit]")  # deliberately, having seen it
    stale.wait_for_selector("text=Guidelines saved.")
    cset = CalibrationSet.objects.get(pk=cset.pk)
    assert (cset.instructions, cset.instructions_version) == ("Rule by ALICE", 2)
    assert not _script_errors(stale) and not _script_errors(tabs["carol"])


def test_the_preference_queue_keeps_a_choice_and_critique_across_an_expired_session(
    browser_pages, live_server, bob
):
    judge_run = pairwise_judge_run(2)
    first = judge_run.trial_ids[0]
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    page = browser_pages()
    page.goto(f"{live_server.url}/accounts/login/?next={url}")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("#label-form")
    page.wait_for_load_state("load")  # htmx and the queue's keys are on (deferred scripts)
    swapped = page.inner_text(".response-a") == "HEAD-1"  # the order drawn for this pair

    page.keyboard.press("b")
    page.keyboard.press("c")
    page.keyboard.type("B is shorter")
    Session.objects.all().delete()  # the session expires on the server while bob types
    page.click("#label-form button[type=submit]")
    page.wait_for_selector("#queue-session-expired", state="visible")
    assert page.input_value("#id_critique") == "B is shorter"
    assert page.is_checked("input[name=verdict][value=B]")
    assert PreferenceLabel.objects.count() == 0

    page.click("#queue-relogin")
    page.wait_for_selector("#id_username")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("#preference-saved")
    label = PreferenceLabel.objects.get(reviewer=bob)
    # B on screen is the base run's response (A in the pair's naming) when shown swapped.
    assert (label.pair_id, label.preferred, label.critique, label.shown_swapped) == (
        first,
        "A" if swapped else "B",
        "B is shorter",
        swapped,
    )
    assert "labeled 1 of 2" in page.inner_text("#label-queue")
    assert not _script_errors(page)
