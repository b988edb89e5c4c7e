"""Browser test of an agent trial's page (issue 15): the trajectory's hostile steps (markup
in a message, in a tool's arguments and results, a 200 KB result) are shown as text, the
large result is folded with its size until opened, and the final state sits beside the goal.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import INJECTED, log_in
from tests.trajectory_builders import HOSTILE_RESULT, agent_trial

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_a_hostile_trajectory_is_shown_escaped_and_a_large_result_folded(
    browser_page, live_server, alice
):
    page = browser_page
    trial = agent_trial()
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/trials/{trial.uuid}/")
    page.wait_for_selector("#trajectory")

    # nothing from the trajectory ran or became an element
    assert page.dialogs == []
    assert page.query_selector_all(f"#trajectory :is({INJECTED})") == []
    assert page.query_selector_all("#states :is(script:not([src]))") == []
    assert page.locator("#step-3 pre.step-text").inner_text() == HOSTILE_RESULT
    assert page.locator("#step-2 pre.step-text").inner_text().find("<svg onload=alert(5)>") > 0

    # the failed tool step is marked, the 200 KB result folded with its size
    assert "failed" in page.locator("#step-5 .step-head").inner_text()
    fold = page.locator("#step-7 details.step-fold")
    assert fold.get_attribute("open") is None
    summary = fold.locator("summary").inner_text()
    assert summary.startswith("200.0 KB:") and "<b onclick=alert(3)>big</b>" in summary
    assert not page.locator("#step-7 pre.step-text").is_visible()
    fold.locator("summary").click()
    assert page.locator("#step-7 pre.step-text").is_visible()
    assert page.locator("#step-7 .step-cut").is_visible()

    # per-step figures, totals, and the final state beside the goal state
    assert "120 in / 18 out" in page.locator("#step-1 .step-metrics").inner_text()
    assert "5120 in / 22 out" in page.locator(".trajectory-totals").inner_text()
    assert "<script>alert('state')</script>" in page.locator("#final-state").inner_text()
    assert '"refunded": 30' in page.locator("#goal-state").inner_text()
    assert page.dialogs == [] and page.console_errors == []
