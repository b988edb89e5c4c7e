"""Browser test: notes on a calibration item. A reviewer asks on an item, the lead finds the
open question on the set page and answers it, and another reviewer sees the thread only once
they have labeled the item.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from labeling.models import ItemNote
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_a_question_is_answered_and_shown_to_another_reviewer_only_after_labeling(
    browser_pages, live_server, alice, bob
):
    dave = User.objects.create_user(username="dave", password=PASSWORD)
    dave.groups.add(Group.objects.get(name="reviewer"))
    run, version, trials = judged_run(3)
    cset = calibration_set(run, version, trials)
    item_url = (
        live_server.url
        + reverse("labeling:queue", kwargs={"set_id": cset.uuid})
        + f"?trial={trials[0].uuid}"
    )

    asker = browser_pages()
    log_in(asker, live_server, "bob")
    asker.goto(item_url)
    asker.fill("#item-note-text", "Is a *partial* refund a pass? BOB-ASKS")
    asker.click("#item-note-save")
    asker.wait_for_selector("#item-notes-list >> text=BOB-ASKS")
    assert asker.inner_html("#item-notes-list").count("<em>partial</em>") == 1

    lead = browser_pages()
    log_in(lead, live_server, "alice")
    lead.goto(live_server.url + reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))
    lead.click("#open-questions a")
    lead.wait_for_selector("#item-notes-list >> text=BOB-ASKS")
    lead.fill("#item-note-text", "No: a fail. ALICE-ANSWERS")
    lead.click("#item-note-save")
    lead.wait_for_selector("#item-notes-list >> text=ALICE-ANSWERS")
    lead.goto(live_server.url + reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))
    assert "None: every reviewer's note has a lead's answer" in lead.inner_text("#open-questions")

    other = browser_pages()
    log_in(other, live_server, "dave")
    other.goto(item_url)
    other.wait_for_selector("#item-notes")
    assert "BOB-ASKS" not in other.inner_text("#queue-item")
    assert "ALICE-ANSWERS" not in other.inner_text("#queue-item")
    other.check("input[name=verdict][value=fail]")
    other.click("#queue-save")
    other.wait_for_selector("text=Saved fail.")
    other.goto(item_url)
    other.wait_for_selector("#item-notes-list >> text=ALICE-ANSWERS")
    assert "BOB-ASKS" in other.inner_text("#item-notes-list")
    assert ItemNote.objects.count() == 2
    for page in (asker, lead, other):
        assert not page.console_errors, page.console_errors
