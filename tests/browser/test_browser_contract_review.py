"""Review after a contract, end to end in Chromium: an engineer sends a run's review trials
to a review queue from the run page; a reviewer passes every dimension of one trial; its
decision becomes accepted; a changed output cannot inherit that acceptance."""

from __future__ import annotations

import re

import pytest

from demo.expense_contract import CONTRACT_GRADERS, REVIEW_DIMENSIONS
from evals.grading.contract.decisions import run_decisions
from evals.grading.recorded import run_grade
from evals.models import Run, Trial
from tests.browser.conftest import log_in
from tests.evals.test_grade_run import recorded_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def decisions(run: Run) -> dict[str, str]:
    d = run_decisions(run=Run.objects.get(pk=run.pk))
    keys = dict(Trial.objects.filter(run=run).values_list("id", "case__key"))
    return {keys[t]: v.decision for t, v in d.trials.items()}


def test_a_review_trial_is_accepted_after_every_dimension_passes(
    browser_page, live_server, carol, bob
):
    run = recorded_run(with_error=False)
    run_grade(run=run, graders=CONTRACT_GRADERS)
    page = browser_page

    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/runs/{run.uuid}/")
    assert "4 in review" in page.inner_text("#contract-decisions")
    page.click("#review-start")
    page.wait_for_url(re.compile(r".*/calibration-sets/[0-9a-f-]+/$"))
    queue_url = page.url + "label/"
    page.context.clear_cookies()

    log_in(page, live_server, "bob")
    page.goto(queue_url)
    page.wait_for_selector("#review-form")
    first = Trial.objects.get(run=run, output=page.inner_text("#queue-output"))
    for dimension in REVIEW_DIMENSIONS:
        page.check(f"#dimension-{dimension} input[value=pass]")
    page.click("#review-save")
    page.wait_for_selector("text=Review saved.")
    assert page.inner_text(".progress-text") == "1 of 4 labeled"

    assert decisions(run)[first.case.key] == "accepted"
    assert sorted(decisions(run).values()).count("review") == 3

    # The output changes: the acceptance was for the old output and does not carry over.
    Trial.objects.filter(pk=first.pk).update(output=first.output.replace("T-600", "T-601"))
    assert decisions(run)[first.case.key] == "review"
    page.context.clear_cookies()
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/runs/{run.uuid}/")
    assert "0 accepted" in page.inner_text("#contract-decisions")
    assert page.console_errors == []
