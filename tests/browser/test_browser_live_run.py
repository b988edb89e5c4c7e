"""Live pages (issue 16, point 5): a run page, and a judge run page, opened while the work is
going show the final report when it ends, without a reload (the import page: see
test_browser_import_job.py). Same Chromium rule as the other browser tests."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import Grade, Run
from tests.browser.conftest import log_in
from tests.judge_builders import judge_run_in_flight, make_trials
from tests.report_builders import add_trial, make_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_the_report_swaps_in_when_the_run_ends_while_the_page_watches(
    browser_page, live_server, carol
):
    page = browser_page
    run = make_run(cases=[("c1", []), ("c2", [])], graders=[{"key": "exact", "kind": "exact"}], n=2)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, trials_total=4)
    log_in(page, live_server, carol.username)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#run-progress[data-status=running]")
    assert "UNIQUE-FAILURE-REASON" not in page.inner_text("#run-report")
    page.evaluate("window.__same_document = true")  # gone if the page reloads

    for key in ("c1", "c2"):
        add_trial(run, key, 1, grades={"exact": True})
        add_trial(run, key, 2, grades={"exact": (False, 0.0, "UNIQUE-FAILURE-REASON")})
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED, trials_finished=4, trials_total=4
    )

    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=20_000)
    page.locator("#run-report").get_by_text("UNIQUE-FAILURE-REASON").first.wait_for(timeout=20_000)
    assert page.evaluate("window.__same_document") is True
    assert page.locator("#run-report").count() == 1  # swapped, not nested
    assert not page.console_errors


def test_a_judge_runs_result_swaps_in_when_it_ends_while_the_page_watches(
    browser_page, live_server, carol
):
    """A judge run in flight (its worker elsewhere: rows written here): its page shows the
    counts so far; when it ends, the progress poll swaps the final result in, no reload."""
    from judges.models import JudgeRun  # noqa: PLC0415

    page = browser_page
    trials = make_trials(["a", "b", "c", "d"], run="judged-live")
    judge_run = judge_run_in_flight(trials, judge_name="live", graded=0)
    log_in(page, live_server, carol.username)
    page.goto(f"{live_server.url}{reverse('judges:judge-run-detail', args=[judge_run.uuid])}")
    page.wait_for_selector("#judge-run-report[data-status=running]")
    assert page.locator('#judge-run-report [data-count="passed"]').inner_text() == "0"
    page.evaluate("window.__same_document = true")  # gone if the page reloads

    for trial, passed in zip(trials, (True, True, True, False), strict=True):
        Grade.objects.create(
            trial=trial,
            grader=judge_run.grader,
            judge_version=judge_run.judge_version,
            passed=passed,
            score=1.0 if passed else 0.0,
            reason="r",
            gating=False,
        )
    JudgeRun.objects.filter(id=judge_run.id).update(status="succeeded", trials_graded=4)

    page.wait_for_selector("#judge-run-report[data-status=succeeded]", timeout=20_000)
    report = page.locator("#judge-run-report")
    assert report.locator('[data-count="passed"]').inner_text() == "3"
    assert report.locator('[data-count="failed"]').inner_text() == "1"
    assert "Result" in report.inner_text() and "75.0% of 4 verdicts" in report.inner_text()
    assert page.evaluate("window.__same_document") is True
    assert page.locator("#judge-run-report").count() == 1  # swapped, not nested
    assert page.locator("#judge-run-progress[data-status=succeeded]").count() == 1
    assert not page.console_errors
