"""Browser tests: a real Chromium (Debian's /usr/bin/chromium) driven by Playwright's sync API
against pytest-django's live server.

Where /usr/bin/chromium is missing the tests skip with the reason, except under CI=true,
where they fail: CI must exercise the browser.
"""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from evals.models import Case, Grade, Run, Suite, Trial
from tests.browser.conftest import HOSTILE_OUTPUT, HOSTILE_RUN_NAME, INJECTED, log_in

GRADERS = [{"key": "says-expected", "kind": "contains", "config": {}}]

# serialized_rollback: a transactional test flushes the database after it runs, which would
# drop the role groups created by a data migration; this restores them for the next test.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def make_suite() -> Suite:
    suite = Suite.objects.create(name="arith")
    for i, (question, answer) in enumerate([("2+2", "4"), ("3+4", "7"), ("5+5", "10")]):
        Case.objects.create(
            suite=suite, key=f"c{i + 1}", input=f"What is {question}?", expected=answer
        )
    return suite


def test_an_engineer_starts_a_run_watches_it_finish_and_reads_a_failure_reason(
    browser_page, live_server, carol
):
    page = browser_page
    suite = make_suite()
    log_in(page, live_server, "carol")

    page.click("text=Start a run")
    page.wait_for_url(re.compile(r".*/runs/new/$"))
    page.select_option("#id_suite", str(suite.uuid))
    page.fill("#id_name", "browser run")
    page.check("input[name=target_kind][value=simulated]")
    assert page.is_hidden("#id_base_url")  # only the simulated target's options show
    page.fill("#id_seed", "11")
    page.fill("#id_pass_probability", "0.5")
    page.fill("#id_trials_per_case", "3")
    page.fill("#id_graders", json.dumps(GRADERS))
    page.click("button:has-text('Start run')")

    run = Run.objects.get(suite=suite, name="browser run")
    page.wait_for_url(f"{live_server.url}{run.get_absolute_url()}")
    # Celery is eager in tests, so the run may already be over; else the polled fragment
    # replaces itself every 2 s until the run is terminal.
    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=30_000)
    progress = page.locator("#run-progress progress")
    assert progress.get_attribute("value") == progress.get_attribute("max") == "9"
    assert "9/9" in page.inner_text("#run-progress")

    failing = Trial.objects.filter(run=run, grades__passed=False).select_related("case").first()
    assert failing is not None, "seed 11 at p=0.5 must give at least one failing trial"
    reason = Grade.objects.get(trial=failing).reason
    case_url = reverse("evals:run-case", args=[run.uuid, failing.case.uuid])
    page.locator(f'a[href="{case_url}"]').first.click()  # the report's per-case table
    page.wait_for_url(f"{live_server.url}{case_url}")
    assert reason in page.inner_text(f"#trial-{failing.uuid}")
    assert page.locator(f"#trial-{failing.uuid} .badge.fail").count() == 1
    assert page.dialogs == []
    assert page.console_errors == []


def test_hostile_text_is_inert_and_the_run_page_has_no_csp_violations(
    browser_page, live_server, bob
):
    page = browser_page
    suite = make_suite()
    case = suite.cases.get(key="c1")
    case.tags = ['"><svg onload=alert(3)>']
    case.save()
    run = Run.objects.create(
        suite=suite,
        name=HOSTILE_RUN_NAME,
        target_kind="simulated",
        status=Run.Status.SUCCEEDED,
        trials_total=1,
        trials_finished=1,
        graders=GRADERS,
    )
    trial = Trial.objects.create(
        run=run,
        case=case,
        attempt=1,
        status=Trial.Status.OK,
        output=HOSTILE_OUTPUT,
        raw_response={"text": HOSTILE_OUTPUT},
    )
    Grade.objects.create(
        trial=trial,
        grader="says-expected",
        status="ok",
        passed=False,
        reason='x" onmouseover="alert(document.domain)',
    )
    log_in(page, live_server, "bob")

    urls = [
        reverse("evals:run-list"),
        run.get_absolute_url(),
        reverse("evals:run-case", args=[run.uuid, case.uuid]),
        reverse("evals:trial-detail", args=[trial.uuid]),
    ]
    for url in urls:
        page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("networkidle")
        assert page.locator(INJECTED).count() == 0, url
        page.hover("h1")
        assert page.dialogs == [], url
        assert page.console_errors == [], url
    page.goto(f"{live_server.url}{urls[2]}")
    assert HOSTILE_OUTPUT in page.inner_text("pre.output")
    page.goto(f"{live_server.url}{urls[0]}")
    assert HOSTILE_RUN_NAME in page.inner_text("table.runs")
