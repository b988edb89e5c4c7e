"""Browser test of issue 4: an engineer creates a judge version in the UI, runs it on a run
against the real local fake server (a scripted judge), and reads provisional grades with
their reasons on the trial page. Skip/fail rule for a missing Chromium: tests/browser/conftest.py.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from evals.models import Grade
from judges.models import JudgeVersion
from tests.browser.conftest import INJECTED, log_in
from tests.fakellm import FakeLLM
from tests.judge_builders import judge_run_in_flight, make_trials, verdict_json

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

REASONING = "Berlin is not the capital of France <img src=x onerror=alert(1)>"


def test_an_engineer_creates_a_judge_version_runs_it_and_reads_provisional_grades(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    carol,
):
    page = browser_page
    trials = make_trials(["Berlin", "Paris is in Germany"], run="capitals")
    with FakeLLM(responder=lambda body: verdict_json("FAIL", REASONING)) as llm:
        log_in(page, live_server, "carol")
        page.goto(f"{live_server.url}{reverse('judges:judge-list')}")
        page.click("text=New judge version")
        page.fill("#id_name", "capital-checker")
        page.select_option("#id_kind", "rubric")
        page.fill("#id_base_url", llm.base_url)
        page.fill("#id_model", "judge-model")
        page.fill("#id_params_json", '{"temperature": 0, "criteria": "Names the right city."}')
        page.click("form.judge-version-form button[type=submit]")
        page.wait_for_selector("text=Created capital-checker v1")
        version = JudgeVersion.objects.get()
        assert page.locator("h1 .badge.provisional").inner_text() == "provisional"

        page.select_option("#id_run", str(trials[0].run.uuid))
        page.click("text=Grade run")
        page.wait_for_selector("text=is grading 2 trials of run capitals")
        # On to the judge run's page: its progress bar, finished (the test's Celery is eager).
        bar = page.locator("#judge-run-progress")
        assert "2/2 trials graded" in bar.inner_text() and "succeeded" in bar.inner_text()
        assert bar.locator("progress").get_attribute("value") == "2"
        assert len(llm.bodies) == 2
        page.click(f"p.crumbs a[href$='{version.uuid}/']")
        assert "2 of 2" in page.locator("table.judge-runs").inner_text()

    page.goto(f"{live_server.url}{reverse('evals:trial-detail', args=[trials[0].uuid])}")
    card = page.locator("section.judge-grade")
    assert card.locator(".badge.provisional").inner_text() == "provisional"
    assert card.locator(".badge.fail").inner_text() == "fail"
    assert card.locator(".judge-reasoning").inner_text() == REASONING
    assert re.search(r"capital-checker v1", card.inner_text())
    assert page.locator(INJECTED).count() == 0 and page.dialogs == []
    assert Grade.objects.filter(judge_version=version, passed=False, gating=False).count() == 2


def test_the_judge_run_bar_moves_while_it_runs_and_the_cancel_button_stops_it(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    carol,
):
    """A judge run in flight (its worker elsewhere: rows written here): the page's bar polls
    and moves, and "Cancel judge run" cancels it in place (htmx) and stops the polling."""
    from judges.models import JudgeRun  # noqa: PLC0415

    page = browser_page
    trials = make_trials(["a", "b", "c", "d"], run="inflight")
    judge_run = judge_run_in_flight(trials, judge_name="slow", graded=1)
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}{reverse('judges:judge-run-detail', args=[judge_run.uuid])}")
    bar = page.locator("#judge-run-progress progress")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("1", "4")
    JudgeRun.objects.filter(id=judge_run.id).update(trials_graded=3)
    page.wait_for_selector('#judge-run-progress progress[value="3"]', timeout=10_000)
    page.click("text=Cancel judge run")
    page.wait_for_selector('#judge-run-progress[data-status="cancelled"]')
    assert "Cancelled by carol" in page.locator("#judge-run-progress").inner_text()
    assert page.locator("text=Cancel judge run").count() == 0
    assert JudgeRun.objects.get().status == "cancelled"
