"""Browser tests of growing the golden set (issue 16, item 4): an engineer adds a trial as a
case, edits a case and retires one in the dashboard's case editor, and a comparison of a run
on the old case with a run on the edited case does not pair them. Real Chromium via
Playwright (see tests/browser/conftest.py for the skip/fail rule under CI)."""

from __future__ import annotations

import re

import pytest

from evals.models import Case, CaseChange, Grade, Run, Suite, Trial
from tests.browser.conftest import HOSTILE_OUTPUT, log_in
from tests.comparison_builders import GRADERS, db_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def head_run(suite: Suite, verdicts: dict[str, str]) -> Run:
    """A succeeded run "head" on the suite's active cases (by key), judged "P"/"F"."""
    run = Run.objects.create(
        suite=suite,
        name="head",
        target_kind="callable",
        graders=GRADERS,
        trials_per_case=2,
        status=Run.Status.SUCCEEDED,
    )
    for key, marks in verdicts.items():
        case = Case.objects.active().get(suite=suite, key=key)
        for attempt, mark in enumerate(marks, start=1):
            trial = Trial.objects.create(
                run=run, case=case, attempt=attempt, status="ok", output="y" * 10
            )
            Grade.objects.create(
                trial=trial, grader="judge", status="ok", passed=mark == "P", score=1.0
            )
    return run


def test_an_engineer_adds_a_trial_as_a_case_edits_a_case_and_retires_one(
    browser_page, live_server, carol
):
    page = browser_page
    base = db_run({"refund": "PF", "hours": "PP"}, name="base")
    suite = base.suite
    trial = base.trials.get(case__key="refund", attempt=2)
    log_in(page, live_server, "carol")

    # 1. "Add as a case" from the trial page, prefilled with the trial's output.
    page.goto(f"{live_server.url}/trials/{trial.uuid}/")
    page.click("#add-as-case")
    page.wait_for_selector("#case-new-title:has-text('Add as a case')")
    assert page.input_value("#id_expected") == "x" * 10
    assert page.input_value("#id_suite") == str(suite.uuid)
    page.fill("#id_key", "refund-golden")
    page.fill("#id_expected", "Refunds within 30 days.")
    page.fill("#id_tags", f"from-prod, {HOSTILE_OUTPUT}")
    page.click("#case-save")
    page.wait_for_url(re.compile(rf".*/suites/{suite.uuid}/$"))
    assert "Case refund-golden added to S." in page.inner_text("ul.messages")
    row = page.locator("#case-changes tr[data-case='refund-golden']")
    assert "created" in row.inner_text() and "carol" in row.inner_text()
    assert "trial 2 of base" in row.inner_text()
    assert page.locator("img[onerror]").count() == 0  # the hostile tag is text
    assert HOSTILE_OUTPUT in page.inner_text("#cases tr[data-case='refund-golden']")
    golden = Case.objects.get(key="refund-golden")
    assert golden.expected == "Refunds within 30 days." and HOSTILE_OUTPUT in golden.tags

    # A second save under a taken key asks for an explicit choice.
    page.goto(f"{live_server.url}/trials/{trial.uuid}/")
    page.click("#add-as-case")
    page.fill("#id_key", "refund-golden")
    page.click("#case-save")
    page.wait_for_selector("#case-conflict")
    assert Case.objects.filter(key="refund-golden").count() == 1

    # 2. The case editor: new content for "hours" retires it and creates a new case.
    page.goto(f"{live_server.url}/suites/{suite.uuid}/")
    page.click("#cases tr[data-case='hours'] a.case-edit-link")
    page.wait_for_selector("#case-edit-title:has-text('Edit case hours')")
    page.select_option("#id_expected_format", "text")
    page.fill("#id_expected", "9 to 5")
    page.click("#case-save")
    page.wait_for_url(re.compile(rf".*/suites/{suite.uuid}/$"))
    assert "the old case is retired and replaced" in page.inner_text("ul.messages")
    replaced = page.locator("#case-changes tr[data-action='replaced'][data-case='hours']")
    assert "replaces hours" in replaced.inner_text()
    old, new = Case.objects.filter(suite=suite, key="hours").order_by("id")
    assert old.retired_at is not None and old.replaced_by_id == new.id

    # 3. Retire the added case from its editor.
    page.click("#cases tr[data-case='refund-golden'] a.case-edit-link")
    page.click("#case-retire")
    page.wait_for_url(re.compile(rf".*/suites/{suite.uuid}/$"))
    assert page.locator("#cases tr[data-case='refund-golden']").count() == 0
    assert page.locator("#case-changes tr[data-action='retired']").count() == 1
    assert list(CaseChange.objects.order_by("id").values_list("action", flat=True)) == [
        "created",
        "replaced",
        "retired",
    ]

    # 4. A changed case does not compare with its old self: the head run asks the new
    # "hours", the base the old one; the comparison lists it as changed, not as a row.
    head = head_run(suite, {"refund": "PP", "hours": "FF"})
    page.goto(f"{live_server.url}/runs/{head.uuid}/compare/{base.uuid}/")
    page.wait_for_selector("#unmatched ul.changed")
    assert page.locator("#unmatched ul.changed li").all_inner_texts() == ["hours"]
    rows = page.locator("#case-table tbody tr td:first-child").all_inner_texts()
    assert rows == ["refund"]
    assert not page.console_errors and not page.dialogs


def test_a_nul_typed_in_the_case_editor_comes_back_on_the_field_with_the_text_kept(
    browser_page, live_server, carol
):
    page = browser_page
    suite = db_run({"refund": "PP"}, name="base").suite
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/cases/new/?suite={suite.uuid}")
    page.fill("#id_key", "pasted")
    # A NUL pasted from a log: the browser posts it as %00.
    page.evaluate("document.querySelector('#id_input').value = 'Where is my order?\\u0000'")
    page.click("#case-save")
    page.wait_for_selector("#id_input_error")
    assert "input: holds U+0000 (NUL)" in page.inner_text("#id_input_error")
    assert "nothing was saved" in page.inner_text("#id_input_error")
    assert page.input_value("#id_input") == "Where is my order?\ufffd"
    assert page.input_value("#id_key") == "pasted"
    assert not Case.objects.filter(key="pasted").exists()
