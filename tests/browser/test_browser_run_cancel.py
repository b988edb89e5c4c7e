"""The run page's Cancel button asks first (``hx-confirm`` on the cancel form): dismissing the
dialog sends nothing and the run goes on; accepting cancels it. Same Chromium rule as the
other browser tests."""

from __future__ import annotations

import pytest

from evals.models import Run
from tests.browser.conftest import HOSTILE_RUN_NAME, log_in
from tests.report_builders import make_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

QUESTION = f"Cancel run {HOSTILE_RUN_NAME}? Calls in flight finish; no new call starts."


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING])
def test_cancel_asks_first_and_cancels_only_when_accepted(browser_page, live_server, carol, status):
    page = browser_page
    run = make_run(
        cases=[("c1", [])], graders=[{"key": "exact", "kind": "exact"}], name=HOSTILE_RUN_NAME
    )
    Run.objects.filter(pk=run.pk).update(status=status, trials_total=1)
    cancel_posts = []
    page.on(
        "request",
        lambda r: r.method == "POST" and "/cancel/" in r.url and cancel_posts.append(r.url),
    )
    log_in(page, live_server, carol.username)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector(f"#run-progress[data-status={status}]")

    page.click("#run-progress button.danger")  # the dialog is dismissed (the fixture's default)
    page.evaluate("1")  # a round trip: the click's handlers have run
    assert page.dialogs == [QUESTION]  # the run's name as typed, as text
    assert cancel_posts == []
    run.refresh_from_db()
    assert run.status == status and run.cancelled_by is None
    assert page.locator(f"#run-progress[data-status={status}] button.danger").count() == 1

    page.accept_dialogs = True
    page.click("#run-progress button.danger")
    page.wait_for_selector("#run-progress[data-status=cancelled]")
    assert page.dialogs == [QUESTION, QUESTION]
    assert len(cancel_posts) == 1
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.cancelled_by == carol
    assert page.locator("#run-progress button.danger").count() == 0
    assert not page.console_errors
