"""Browser test of blind reviewing (issue 12, point 8): a reviewer with unlabeled items in a
calibration set follows the links to a trial of that set and finds no judge verdict there;
once they have labeled the set, the same page shows it, and a lead sees it all along.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import Label
from tests.browser.conftest import log_in
from tests.labeling_builders import calibration_set, judged_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_a_reviewer_with_open_items_cannot_reach_a_judge_verdict_through_the_trial_page(
    browser_page,
    live_server,
    alice,
    bob,
):
    page = browser_page
    run, version, trials = judged_run(3, judge_fails=1)
    cset = calibration_set(run, version, trials)
    reason = "JUDGE-REASONING-01"

    log_in(page, live_server, "bob")
    # The run page hides its case table from him (it would repeat the verdicts) ...
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#blind-run-note")
    assert reason not in page.content()
    # ... so he types the run-case address, then follows its link to the trial page.
    case_url = reverse(
        "evals:run-case", kwargs={"run_id": run.uuid, "case_id": trials[0].case.uuid}
    )
    page.goto(f"{live_server.url}{case_url}")
    page.wait_for_selector("h1:has-text('Case c01')")
    assert reason not in page.content()
    page.click("header.trial-head a:has-text('trial page')")
    page.wait_for_selector("h1:has-text('Case c01, attempt 1')")
    assert page.is_visible(".blind-note")
    html = page.content()
    assert reason not in html
    assert page.query_selector(".judge-grade") is None
    assert page.query_selector("table.grades .badge.fail") is None
    # The API the page's user could call instead answers the same.
    page.goto(f"{live_server.url}/api/grades/?run={run.uuid}")
    assert reason not in page.content()

    # Once bob has labeled every item of the set, nothing is blind for him any more.
    for t in trials:
        Label.objects.create(trial=t, reviewer=bob, verdict="pass")
    page.goto(f"{live_server.url}/trials/{trials[0].uuid}/")
    page.wait_for_selector(".judge-grade")
    assert reason in page.content()

    # A lead sees the verdict on a set nobody has labeled.
    Label.objects.filter(reviewer=bob).delete()
    assert cset.items.count() == 3
    page.context.clear_cookies()
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/trials/{trials[0].uuid}/")
    page.wait_for_selector(".judge-grade")
    assert reason in page.content()
    assert not page.is_visible(".blind-note")
