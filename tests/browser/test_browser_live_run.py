"""Live pages (issue 16, point 5): a run page opened while the run is going shows the final
report when the run ends, without a reload. Same Chromium rule as the other browser tests."""

from __future__ import annotations

import pytest

from evals.models import Run
from tests.browser.conftest import log_in
from tests.report_builders import add_trial, make_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_the_report_swaps_in_when_the_run_ends_while_the_page_watches(
    browser_page, live_server, carol
):
    page = browser_page
    run = make_run(cases=[("c1", []), ("c2", [])], graders=[{"key": "exact", "kind": "exact"}], n=2)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, trials_total=4)
    log_in(page, live_server, carol.username)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#run-progress[data-status=running]")
    assert "UNIQUE-FAILURE-REASON" not in page.inner_text("#run-report")
    page.evaluate("window.__same_document = true")  # gone if the page reloads

    for key in ("c1", "c2"):
        add_trial(run, key, 1, grades={"exact": True})
        add_trial(run, key, 2, grades={"exact": (False, 0.0, "UNIQUE-FAILURE-REASON")})
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED, trials_finished=4, trials_total=4
    )

    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=20_000)
    page.locator("#run-report").get_by_text("UNIQUE-FAILURE-REASON").first.wait_for(timeout=20_000)
    assert page.evaluate("window.__same_document") is True
    assert page.locator("#run-report").count() == 1  # swapped, not nested
    assert not page.console_errors
