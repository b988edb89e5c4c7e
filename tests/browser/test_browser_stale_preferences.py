"""Browser test of a stale preference tab: one reviewer, two tabs (two browser contexts) on
the preference queue's same pair. The tab that saved first wins; the older tab's save is
refused saying what the preference is now, keeps the choice and critique typed, and leaves
the preference of record as it was.

Real Chromium via Playwright (see tests/browser/conftest.py for the skip/fail rule under CI).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import PreferenceLabel
from tests.browser.conftest import log_in
from tests.labeling_builders import pairwise_judge_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_an_older_preference_tab_is_refused_and_the_label_of_record_stays(
    browser_pages, live_server, bob
):
    judge_run = pairwise_judge_run(2)
    first = judge_run.trial_ids[0]
    url = live_server.url + reverse("labeling:preferences", args=[judge_run.uuid])
    newer, older = browser_pages(), browser_pages()
    for tab in (older, newer):
        log_in(tab, live_server, "bob")
        tab.goto(url)
        tab.wait_for_selector("#label-form")
        tab.wait_for_load_state("load")  # htmx and the queue's keys are on (deferred scripts)
    assert older.inner_text(".response-a") == newer.inner_text(".response-a")  # the same pair
    swapped = newer.inner_text(".response-a") == "HEAD-1"

    newer.keyboard.press("a")
    newer.click("#label-form button[type=submit]")
    newer.wait_for_selector("#preference-saved")

    older.keyboard.press("b")
    older.keyboard.press("c")
    older.keyboard.type("B is clearer")
    older.click("#label-form button[type=submit]")
    older.wait_for_selector(".preference-conflict")
    assert (
        "this preference changed since you opened it (now A is better, revision 1; your form "
        "had none); reload it — nothing was saved" in older.inner_text("#preference-errors")
    )
    assert older.is_checked("input[name=verdict][value=B]")  # the choice and critique kept
    assert older.input_value("#id_critique") == "B is clearer"
    label = PreferenceLabel.objects.get(reviewer=bob)
    # A on screen is the head run's response (B in the pair's naming) when shown swapped.
    assert (label.pair_id, label.preferred, label.critique, label.version) == (
        first,
        "B" if swapped else "A",
        "",
        1,
    )
    assert older.console_errors == [] and newer.console_errors == []
