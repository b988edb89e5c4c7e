"""Browser test of the grid of runs (issue 16, item 2): an engineer opens the grid from the
suite page, filters it to cases flaky in any run, and opens one case's history, whose trials
are links. Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail
rule under CI)."""

from __future__ import annotations

import re

import pytest

from evals.models import Case, Suite
from tests.browser.conftest import log_in
from tests.comparison_builders import db_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_an_engineer_filters_the_grid_to_flaky_cases_and_opens_a_case_history(
    browser_page, live_server, carol
):
    page = browser_page
    db_run({"steady": "PPP", "wobbly": "PFP", "broken": "PPP"}, name="night-1")
    db_run({"steady": "PPP", "wobbly": "PPF", "broken": "FFF"}, name="night-2")
    db_run({"steady": "PPP", "wobbly": "FFP", "broken": "FFF"}, name="night-3")
    suite = Suite.objects.get(name="S")
    log_in(page, live_server, "carol")

    page.goto(f"{live_server.url}/suites/{suite.uuid}/")
    page.click("#suite-grid-link")
    page.wait_for_selector("#grid-table")
    assert page.locator("#grid-table thead th.run-col").count() == 3
    assert sorted(
        page.locator("#grid-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.case)")
    ) == ["broken", "steady", "wobbly"]
    # Each cell's interval mark is drawn (never of zero width) next to its rate.
    assert page.locator("#grid-table td.cell .ci-mark").count() == 9

    page.check("#grid-flaky")
    page.click("#grid-apply")
    page.wait_for_selector("#grid-table[data-flaky='1']")
    assert re.search(r"flaky=1", page.url)  # a real, shareable URL
    shown = page.locator("#grid-table tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.case)"
    )
    assert shown == ["wobbly"]
    assert "1 of 3 cases shown" in page.inner_text("#grid-count")

    page.click("#grid-table a.case-history:has-text('wobbly')")
    case = Case.objects.get(suite=suite, key="wobbly")
    page.wait_for_url(re.compile(rf".*/suites/{suite.uuid}/cases/{case.uuid}/history/$"))
    page.wait_for_selector("#history-table")
    assert page.inner_text("#case-history-title") == "History of case wobbly"
    rows = page.locator("#history-table tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.run)"
    )
    assert rows == ["night-3", "night-2", "night-1"]
    assert "flaky" in page.inner_text("#history-summary")
    # Its trials are one click away.
    page.click("#history-table tr[data-run='night-3'] a.trial-link >> nth=0")
    page.wait_for_selector("h1:has-text('Case wobbly, attempt 1')")
    assert not page.console_errors and not page.dialogs
