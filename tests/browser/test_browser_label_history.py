"""Browser test of issue 13 item 9: labels keep their history. Two browser contexts hold one
item of the queue; a save, an undo and a save again (A-B-A) leave the first context's form
stale, and its save shows the conflict instead of overwriting the newer label.

Real Chromium via Playwright (see tests/browser/test_browser.py for the skip/fail rule under CI)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import Label, LabelRevision
from tests.browser.conftest import log_in
from tests.labeling_builders import calibration_set, judged_run

HTMX_IDLE = (
    "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _settle(page) -> None:
    page.wait_for_function(HTMX_IDLE)


def test_a_stale_tab_gets_a_conflict_after_save_undo_and_save_again(
    browser_pages,
    live_server,
    bob,  # noqa: F811
):
    run, version, trials = judged_run(3, judge_fails=1)
    cset = calibration_set(run, version, trials)
    item_url = (
        f"{live_server.url}{reverse('labeling:queue', kwargs={'set_id': cset.uuid})}"
        f"?trial={trials[0].uuid}"
    )
    tab1, tab2 = browser_pages(), browser_pages()
    for tab in (tab1, tab2):
        log_in(tab, live_server, "bob")

    # tab 1 saves item 1 (version 1)
    tab1.goto(item_url)
    tab1.wait_for_selector("#queue-item h1:has-text('Item 1 of 3')")
    _settle(tab1)
    tab1.keyboard.press("p")
    tab1.keyboard.press("Enter")
    tab1.wait_for_selector("#queue-item h1:has-text('Item 2 of 3')")
    _settle(tab1)
    # tab 2 opens item 1 now: its form holds version 1
    tab2.goto(item_url)
    tab2.wait_for_selector("#queue-item h1:has-text('Item 1 of 3')")
    _settle(tab2)
    assert tab2.input_value("input[name=expected_version]") == "1"
    # tab 1 undoes (version 2: cleared), then saves item 1 again (version 3)
    tab1.keyboard.press("u")
    tab1.wait_for_selector("text=Undid your last label")
    _settle(tab1)
    assert tab1.input_value("input[name=expected_version]") == "2"
    assert not Label.objects.filter(reviewer=bob).exists()
    tab1.keyboard.press("f")
    tab1.keyboard.press("c")
    tab1.keyboard.type("saved after the undo")
    tab1.keyboard.press("Control+Enter")
    tab1.wait_for_selector("#queue-item h1:has-text('Item 2 of 3')")
    _settle(tab1)
    # tab 2, still at version 1, saves: refused with the conflict, its input kept
    tab2.keyboard.press("f")
    tab2.keyboard.press("c")
    tab2.keyboard.type("from the stale tab")
    tab2.keyboard.press("Control+Enter")
    tab2.wait_for_selector("#queue-error")
    _settle(tab2)
    assert "this label changed since you opened it (now revision 3" in tab2.inner_text(
        "#queue-error"
    )
    assert tab2.input_value("textarea[name=critique]") == "from the stale tab"
    assert tab2.input_value("input[name=expected_version]") == "3"

    label = Label.objects.get(reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("fail", "saved after the undo", 3)
    assert list(
        LabelRevision.objects.filter(reviewer=bob).values_list("version", "verdict", "undoes")
    ) == [(1, "pass", None), (2, "", 1), (3, "fail", None)]
    for tab in (tab1, tab2):
        assert tab.dialogs == [] and tab.console_errors == []
