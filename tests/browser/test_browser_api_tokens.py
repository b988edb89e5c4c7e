"""Browser test of issue 13: a token shown once is not shown again by pressing Back (the page
is ``Cache-Control: no-store``, so Chromium neither restores it from its back/forward cache
nor from its HTTP cache).

Real Chromium via Playwright (see tests/browser/test_browser.py for the skip/fail rule under CI)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Error as PlaywrightError

from apitokens.models import ApiToken
from tests.browser.conftest import log_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _settled_content(page) -> str:
    """The page's HTML once Chromium has finished showing what Back led to."""
    for _ in range(40):
        try:
            return page.content()
        except PlaywrightError:  # still navigating to its error page
            page.wait_for_timeout(250)
    raise AssertionError("the page never settled after Back")


def test_back_after_creating_a_token_does_not_show_it_again(browser_page, live_server, alice):
    page = browser_page
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/api-tokens/")
    page.select_option("#id_user", "alice")
    page.fill("#id_name", "CI on main")
    page.click("form.run-form button[type=submit]")
    token = page.input_value("#new-token-value")
    assert len(token) > 20 and ApiToken.objects.filter(name="CI on main").exists()
    page.goto(f"{live_server.url}/runs/")
    try:
        page.go_back()
    except PlaywrightError as exc:
        # Chromium has no copy of the POST's answer: it shows its "confirm form
        # resubmission" page (net::ERR_CACHE_MISS) instead of the page with the token.
        assert "ERR_CACHE_MISS" in str(exc)
    assert token not in _settled_content(page)
    assert page.locator("#new-token-value").count() == 0
    page.console_errors.clear()  # the resubmission page logs a cache-miss error
    assert page.dialogs == []
