"""Browser test of issue 12, point 9: the queue shows the set's guidelines with the item and
behind "?"; a save whose session expired keeps the verdict and critique, offers to log in
again, and saves them after login (never the login page inside the item).

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling import labels
from labeling.models import Label
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _log_in(page, live_server, username, url):
    page.goto(f"{live_server.url}/accounts/login/?next={url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")


def test_guidelines_in_the_queue_and_a_label_kept_through_an_expired_session(
    browser_page, live_server, bob
):
    page = browser_page
    run, version, trials = judged_run(3)
    cset = calibration_set(run, version, trials)
    cset.instructions = "Fail an answer that **invents** a policy.\n\n<b onclick=alert(1)>x</b>"
    cset.save()
    queue_url = reverse("labeling:queue", kwargs={"set_id": cset.uuid})

    _log_in(page, live_server, "bob", queue_url)
    page.wait_for_selector("#queue-item h1:has-text('Item 1 of 3')")
    assert page.inner_text("#queue-guidelines strong") == "invents"
    assert page.query_selector("b[onclick]") is None
    page.keyboard.press("?")
    assert page.is_visible("#queue-help-guidelines")
    page.keyboard.press("Escape")
    page.click("#queue-help-button")
    assert page.is_visible("#queue-help")
    page.click("#queue-help-button")
    assert page.is_hidden("#queue-help")

    page.keyboard.press("f")
    page.keyboard.press("c")
    page.keyboard.type("invents a 90-day refund")
    page.context.clear_cookies()  # the session expires while bob types
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#queue-session-expired", state="visible")
    assert page.query_selector("#queue-item #id_password") is None  # no login page inside
    assert page.input_value("#id_critique") == "invents a 90-day refund"
    assert page.is_checked("input[name=verdict][value=fail]")
    assert Label.objects.count() == 0

    page.click("#queue-relogin")
    page.wait_for_selector("#id_username")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Saved fail.")
    label = Label.objects.get(reviewer=bob)
    assert (label.trial_id, label.verdict, label.critique) == (
        trials[0].id,
        "fail",
        "invents a 90-day refund",
    )
    page.wait_for_selector("#queue-item h1:has-text('Item 2 of 3')")
    page.reload()  # the address still names item 1; the draft was used once
    page.wait_for_selector("#queue-item h1:has-text('Item 1 of 3')")
    page.wait_for_selector("text=your label: fail (revision 1)")
    assert page.is_hidden("#queue-session-expired")
    label.refresh_from_db()
    assert label.version == 1  # not saved a second time
    assert Label.objects.filter(reviewer=bob).count() == 1


def test_a_restored_draft_does_not_overwrite_a_label_changed_while_signed_out(
    browser_page, live_server, bob
):
    """The draft kept through an expired session is saved after login with the version it was
    typed over: a label saved meanwhile (another tab, the API) makes it stale, never replaced."""
    page = browser_page
    run, version, trials = judged_run(2)
    cset = calibration_set(run, version, trials)
    queue_url = reverse("labeling:queue", kwargs={"set_id": cset.uuid})
    _log_in(page, live_server, "bob", queue_url)
    page.wait_for_selector("#queue-item h1:has-text('Item 1 of 2')")
    page.wait_for_load_state("load")

    page.keyboard.press("f")
    page.keyboard.press("c")
    page.keyboard.type("draft typed before the session ended")
    page.context.clear_cookies()
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#queue-session-expired", state="visible")
    # meanwhile another tab of bob's, still signed in, labels the same item
    labels.label_submit(
        trial=trials[0],
        reviewer=bob,
        verdict="pass",
        critique="from the other tab",
        expected_version=0,
        calibration_set=cset,
    )

    page.click("#queue-relogin")
    page.wait_for_selector("#id_username")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Not saved:")
    label = Label.objects.get(reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("pass", "from the other tab", 1)
    # the draft is kept on the form, now at the current version: saving again is a choice
    assert page.input_value("#id_critique") == "draft typed before the session ended"
    assert page.is_checked("input[name=verdict][value=fail]")
    page.click("#queue-save")
    page.wait_for_selector("text=Saved fail.")
    label.refresh_from_db()
    assert (label.verdict, label.version) == ("fail", 2)
