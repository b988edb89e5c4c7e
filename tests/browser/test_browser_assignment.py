"""Browser test of assignment with overlap (labeling.assignment): the lead assigns three
reviewers with overlap 2 on the set's page and sees progress per reviewer and per item; a
reviewer's queue holds only their items and the set's page shows only their own progress.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from labeling.models import ItemAssignment, Label
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _log_in(page, live_server, username, url):
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/?next={url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")


def test_the_lead_assigns_with_overlap_and_a_reviewer_labels_only_their_items(
    browser_page, live_server, alice
):
    page = browser_page
    group = Group.objects.get(name="reviewer")
    for name in ("rev-a", "rev-b", "rev-c"):
        User.objects.create_user(username=name, password=PASSWORD).groups.add(group)
    run, version, trials = judged_run(6)
    cset = calibration_set(run, version, trials)
    set_url = reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})

    _log_in(page, live_server, "alice", set_url)
    page.wait_for_selector("#assignment")
    assert "every reviewer sees every item" in page.inner_text("#assignment")
    page.click("#assignment summary")
    form = page.locator("#assignment-form")
    for name in ("rev-a", "rev-b", "rev-c"):
        form.get_by_label(name, exact=True).check()
    form.locator("input[name=overlap]").fill("2")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#assignment-summary")
    assert "Each item goes to 2 distinct reviewers" in page.inner_text("#assignment-summary")
    rows = page.locator("table.assignment-progress tbody tr").all_inner_texts()
    assert [r.split("\t") for r in rows] == [
        [name, "4", "0", "4"] for name in ("rev-a", "rev-b", "rev-c")
    ]
    assert page.locator("td.item-assigned").all_inner_texts() == ["0 / 2"] * 6
    assert ItemAssignment.objects.count() == 12

    mine = set(
        ItemAssignment.objects.filter(reviewer__username="rev-b").values_list(
            "item__trial__case__key", flat=True
        )
    )
    queue_url = reverse("labeling:queue", kwargs={"set_id": cset.uuid})
    _log_in(page, live_server, "rev-b", queue_url)
    page.wait_for_selector("#queue-item h1:has-text('Item 1 of 4')")
    assert page.inner_text(".progress-text") == "0 of 4 labeled"
    seen = set()
    for done in range(1, 5):
        heading = page.inner_text("#queue-item h1")
        seen.add(heading.split("case ")[1].split(",")[0])
        page.keyboard.press("p")
        page.keyboard.press("Control+Enter")
        page.wait_for_selector(f".progress-text:has-text('{done} of 4 labeled')")
    assert seen == mine
    assert set(Label.objects.values_list("trial__case__key", flat=True)) == mine

    page.goto(f"{live_server.url}{set_url}")
    assert page.inner_text("table.assignment-progress caption") == "Your progress"
    rows = page.locator("table.assignment-progress tbody tr").all_inner_texts()
    assert [r.split("\t") for r in rows] == [["rev-b", "4", "4", "0"]]
    assert page.query_selector("#assignment-form") is None
    assert page.locator("table.calibration-items tbody tr").count() == 4
    assert not page.console_errors
