"""Browser test of issue 5: a reviewer labels 30 items with the keyboard alone, a lead reads
the calibration and marks the judge trusted, a reviewer's approval is refused.

Real Chromium via Playwright (see tests/browser/test_browser.py for the skip/fail rule under CI)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from judges.models import JudgeApproval
from labeling.models import Label, LabelRevision
from tests.browser.conftest import INJECTED, log_in
from tests.labeling_builders import calibration_set, judged_run

HTMX_IDLE = (
    "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_a_reviewer_labels_30_items_by_keyboard_and_a_lead_trusts_the_judge(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    alice,
    bob,  # noqa: F811
):
    page = browser_page
    run, version, trials = judged_run(
        30,
        judge_fails=10,
        outputs=[f"<img src=x onerror=alert({i})> answer {i}" for i in range(30)],
    )
    # 10 human fails can show a false-accept bound of 27.8% at best (Wilson, 0/10): this
    # suite sets its threshold to 30% (the default 10% needs 35 human fails).
    run.suite.trust_thresholds = {"MAX_FAR": 0.3}
    run.suite.save()
    cset = calibration_set(run, version, trials)
    queue_url = reverse("labeling:queue", kwargs={"set_id": cset.uuid})

    log_in(page, live_server, "bob")
    page.goto(f"{live_server.url}{queue_url}")
    # From here on: keys only, no clicks.
    page.keyboard.press("?")
    assert page.is_visible("#queue-help")
    page.keyboard.press("Escape")
    assert page.is_hidden("#queue-help")
    for i in range(1, 31):
        page.wait_for_selector(f"#queue-item h1:has-text('Item {i} of 30')")
        # Keys at machine speed: let htmx finish the swap (settle) before the next key, as a
        # person's reaction time always does (CI once pressed p + Enter inside the settle).
        page.wait_for_function(HTMX_IDLE)
        assert page.inner_text(".progress-text") == f"{i - 1} of 30 labeled"
        page.keyboard.press("f" if i <= 10 else "p")
        if i == 1:
            page.keyboard.press("c")
            page.keyboard.type("cites the wrong policy\nand says p f j k")  # keys type here
            page.keyboard.press("Control+Enter")
        else:
            page.keyboard.press("Enter")
    page.wait_for_selector("text=Done: you have labeled every item in this set.")
    assert page.inner_text(".progress-text") == "30 of 30 labeled"
    assert page.url == f"{live_server.url}{queue_url}"  # htmx: never a page load
    labels = Label.objects.filter(reviewer=bob)
    assert labels.count() == 30
    assert labels.filter(verdict="fail").count() == 10
    assert labels.get(trial=trials[0]).critique == "cites the wrong policy\nand says p f j k"
    # Finished: the judge's verdicts are visible to bob now, so his labels are frozen. Undo
    # (u) is refused; k/j move; a changed verdict saved with Enter is kept as a flagged
    # revision and the label of record stays.
    page.wait_for_function(HTMX_IDLE)
    page.keyboard.press("u")
    page.wait_for_selector("text=cannot be undone")
    page.wait_for_selector("#queue-item h1:has-text('Item 30 of 30')")
    page.wait_for_function(HTMX_IDLE)
    assert Label.objects.filter(reviewer=bob).count() == 30
    page.keyboard.press("k")
    page.wait_for_selector("#queue-item h1:has-text('Item 29 of 30')")
    page.wait_for_function(HTMX_IDLE)
    page.keyboard.press("j")
    page.wait_for_selector("#queue-item h1:has-text('Item 30 of 30')")
    page.wait_for_function(HTMX_IDLE)
    assert page.is_visible("#queue-frozen")
    page.keyboard.press("f")
    page.keyboard.press("Enter")
    page.wait_for_selector("p.message.success:has-text('Your label of record stays pass')")
    assert Label.objects.get(reviewer=bob, trial=trials[29]).verdict == "pass"
    assert LabelRevision.objects.filter(reviewer=bob, after_reveal=True).count() == 1
    assert page.locator(INJECTED).count() == 0
    assert page.dialogs == []
    assert page.console_errors == []

    # a reviewer may not approve: the page and the action are refused
    cal_url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    response = page.goto(f"{live_server.url}{cal_url}?set={cset.uuid}")
    assert response.status == 403
    approve_url = reverse("labeling:trust-approve", kwargs={"version_id": version.uuid})
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    refused = page.request.post(
        f"{live_server.url}{approve_url}",
        form={"n": "30"},
        headers={"X-CSRFToken": csrf, "Referer": live_server.url},
        max_redirects=0,
    )
    assert refused.status == 403
    # Refused for the role (Assay's 403 page), not for the token (Django's CSRF failure).
    assert "Not allowed" in refused.text()
    assert "CSRF verification failed" not in refused.text()
    page.console_errors.clear()  # the two expected 403 responses log resource errors
    assert not JudgeApproval.objects.exists()

    page.context.clear_cookies()
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}{cal_url}?set={cset.uuid}")
    assert page.inner_text("#fig-n") == "30"
    assert "100.0%" in page.inner_text("#fig-agreement")
    assert page.inner_text("#fig-kappa").startswith("1.000")
    assert page.inner_text("#fig-far").startswith("0.0% (0/10; 95% Wilson")
    assert page.inner_text("#fig-frr").startswith("0.0% (0/20; 95% Wilson")
    assert "27.8%" in page.inner_text("#check-far_upper")
    assert page.is_enabled("#mark-trusted")
    page.click("#mark-trusted")
    page.wait_for_selector("text=is trusted.")
    assert re.search(r"approved by alice", page.inner_text("#trust"))
    approval = JudgeApproval.objects.get(judge_version=version)
    assert approval.approved_by == alice
    assert approval.figures["n"] == 30
    assert page.dialogs == []
    assert page.console_errors == []
