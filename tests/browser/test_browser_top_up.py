"""Browser test of settling a suspect (issue 11): an engineer opens an A/A comparison (no
regression, nothing to settle), then a comparison with a suspect case, presses "Settle with
more trials", and watches the decision settle in the live partial. Same Chromium rule as
tests/browser/test_browser.py (skip without it, fail under CI=true).

Celery is eager in the live server (it runs in this process): the button's task message is
held, so the page first shows the top-up under way and polls; then this test delivers it,
as a worker would, and the page's next poll shows the settled decision.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

import evals.comparison.topup as topup_module
from evals.models import TopUp
from evals.tasks import top_up_advance
from tests.browser.conftest import log_in
from tests.evals.test_top_up import executed, make_suite, no_worker_queue, sim

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_an_engineer_settles_a_suspect_case_from_the_comparison_page(
    browser_page, live_server, carol, monkeypatch
):
    page = browser_page
    same = make_suite(name="same")
    aa_base, aa_head = executed(same, "base", sim(1)), executed(same, "again", sim(2))
    changed = make_suite(name="changed")
    base, head = executed(changed, "base", sim(1)), executed(changed, "head", sim(1003, c00=0.3))
    held: list[int] = []
    monkeypatch.setattr(topup_module, "outbox_enqueue", no_worker_queue(held))
    log_in(page, live_server, "carol")

    # The same pipeline twice: no regression, nothing to settle.
    page.goto(f"{live_server.url}{reverse('evals:comparison', args=[aa_head.uuid, aa_base.uuid])}")
    gate = page.locator("#gate-decision")
    assert gate.get_attribute("data-exit-code") == "0"
    assert gate.get_attribute("data-verdict") == "pass"
    assert "Gate: no significant regression" in gate.inner_text()
    assert page.locator("#settle").count() == 0

    # A suspect: c00 went from 5/5 to 3/5, within noise so far.
    url = f"{live_server.url}{reverse('evals:comparison', args=[head.uuid, base.uuid])}"
    page.goto(url)
    assert gate.get_attribute("data-verdict") == "undecided"
    assert "c00" in page.inner_text("#gate-decision ul.suspects")
    page.click("#settle")
    page.wait_for_url(url)
    page.wait_for_selector("#top-up .top-up-progress")
    assert "Settling suspects: round 0" in page.inner_text("#top-up")
    top_up = TopUp.objects.get(head=head, base=base)
    assert held == [top_up.id] and top_up.started_by == carol

    page.evaluate("window.samePage = true")  # gone if the page were loaded again
    top_up_advance.delay(top_up.id)  # the worker takes the message: every round, eagerly

    page.wait_for_selector("#top-up .top-up-result[data-status=settled]", timeout=15_000)
    result = page.inner_text("#top-up")
    assert "Blocked: case c00 dropped from 20/20 to 9/20" in result
    assert "2 rounds, 30 trials added (exit 1)" in result
    assert page.evaluate("window.samePage === true")  # the partial updated in place
    assert page.dialogs == []
    assert page.console_errors == []
