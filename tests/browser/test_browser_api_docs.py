"""Browser test of the API docs page (/api/docs/, config/api_docs.py): Swagger UI from our own
static files lists the operations under the strict CSP, with no console error and no CSP
violation, and "Try it out" answers as the signed-in user. Skip/fail rule for a missing
Chromium: tests/browser/test_browser.py.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.browser.conftest import log_in
from tests.report_builders import make_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

# Runs in the page before its own scripts: collects every CSP violation the page reports
# (Chromium also logs them as console errors, which browser_page records).
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


def test_a_lead_opens_the_api_docs_from_the_nav_and_reads_every_operation(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    alice,
):
    page = browser_page
    run = make_run(cases=[("c1", [])], graders=[], n=1)
    page.add_init_script(RECORD_CSP_VIOLATIONS)
    log_in(page, live_server, "alice")

    page.click("header.topbar nav >> text=API")
    page.wait_for_url(re.compile(r".*/api/docs/$"))
    page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/api/runs/", "/api/runs/{uuid}/", "/api/runs/start"} <= {
        p.replace("\u200b", "").strip() for p in paths
    }

    # "Try it out" runs as the signed-in user (session cookie): the runs list answers 200.
    block = page.locator(".opblock-get", has=page.locator('[data-path="/api/runs/"]')).first
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    status = block.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip() == "200"
    assert str(run.uuid) in block.locator(".live-responses-table").inner_text()

    # The bearer scheme is offered in the Authorize dialog; a schema expands to its fields.
    page.click("button.authorize")
    assert "bearerAuth" in page.locator(".modal-ux").inner_text()
    page.click(".modal-ux button.close-modal")
    model = page.locator("section.models .model-container").first
    model.locator(".model-box-control").first.click()
    model.locator(".property-row").first.wait_for()

    assert page.evaluate("window.__cspViolations") == []
    assert page.console_errors == []
    assert page.dialogs == []


def test_the_api_docs_page_sends_an_anonymous_visitor_to_the_login_page(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
):
    page = browser_page
    page.goto(f"{live_server.url}{reverse('api:docs')}")
    page.wait_for_url(re.compile(r".*/accounts/login/\?next=/api/docs/$"))
    assert page.locator("#swagger-ui").count() == 0
    assert page.locator("input[name=password]").count() == 1
