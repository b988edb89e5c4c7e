"""Browser tests of "what changed": the run page's target card (escaped, no key), "Start a run
like this one" through the prefilled form to a second run whose comparison names the change,
and the live pass rate card following a run's progress. Same Chromium rule as the others."""

from __future__ import annotations

import re

import pytest

from evals.models import Baseline, Run, Suite
from tests.browser.conftest import INJECTED, log_in
from tests.comparison_builders import db_run
from tests.report_builders import add_trial, make_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

HOSTILE = "<img src=x onerror=alert(1)>"
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def test_an_engineer_copies_a_run_changes_the_seed_and_the_comparison_names_it(
    browser_page, live_server, carol
):
    suite = Suite.objects.create(name="copy-suite")
    suite.cases.create(key="c1", input="2+2", expected="4")
    run = Run.objects.create(
        suite=suite,
        name="first",
        target_kind="simulated",
        target={"kind": "simulated", "seed": 7, "default_pass_probability": 0.5, "note": HOSTILE},
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=2,
        status=Run.Status.SUCCEEDED,
    )
    page = browser_page
    log_in(page, live_server, carol.username)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    card = page.locator("#run-target")
    assert "Seed" in card.inner_text() and HOSTILE in card.inner_text()  # shown as text
    assert page.locator(INJECTED).count() == 0

    page.click("#run-like-this")
    page.wait_for_url(re.compile(r".*/runs/new/\?like="))
    assert "Filled in from" in page.inner_text("#run-like-note")
    assert "note" in page.inner_text("#run-like-note")  # not carried: named
    assert page.input_value("#id_name") == "first (copy)"
    assert page.is_checked("input[name=target_kind][value=simulated]")
    assert page.input_value("#id_seed") == "7"
    assert page.input_value("#id_trials_per_case") == "2"
    assert '"exact"' in page.input_value("#id_graders")
    page.fill("#id_seed", "8")
    page.click("button:has-text('Start run')")
    page.wait_for_selector("#run-progress", timeout=30_000)

    second = Run.objects.get(name="first (copy)")
    assert second.target["seed"] == 8 and second.trials_per_case == 2
    page.goto(f"{live_server.url}/runs/{second.uuid}/compare/{run.uuid}/")
    row = page.locator('#target-diff tr[data-key="seed"]')
    assert row.inner_text().split("\t") == ["Seed", "7", "8"]
    assert page.locator(INJECTED).count() == 0
    assert page.console_errors == [] and page.dialogs == []


def test_the_pass_rate_card_follows_a_live_run_without_undefined(browser_page, live_server, bob):
    run = make_run(cases=[("c1", []), ("c2", [])], graders=[{"key": "e", "kind": "exact"}], n=2)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, trials_total=4)
    page = browser_page
    log_in(page, live_server, bob.username)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    card = page.locator("#run-live-report")
    assert "not graded yet" in card.inner_text()
    assert "undefined" not in page.inner_text("#run-report")
    page.evaluate("window.__same_document = true")

    add_trial(run, "c1", 1, grades={"e": True})
    add_trial(run, "c2", 1, grades={"e": False})
    Run.objects.filter(pk=run.pk).update(trials_finished=2)
    page.wait_for_selector("#run-live-report[data-finished='2']", timeout=20_000)
    assert "50.0%" in page.inner_text("#run-live-report")

    add_trial(run, "c1", 2, grades={"e": True})
    add_trial(run, "c2", 2, grades={"e": True})
    Run.objects.filter(pk=run.pk).update(trials_finished=4)
    page.wait_for_selector("#run-live-report[data-finished='4']", timeout=20_000)
    text = page.inner_text("#run-live-report")
    assert "75.0%" in text and "undefined" not in text
    assert page.evaluate("window.__same_document") is True
    assert page.locator("#run-live-report").count() == 1
    assert page.console_errors == [] and page.dialogs == []


def test_the_run_list_marks_the_baseline_and_a_regression_and_the_grid_warns(
    browser_page, live_server, bob
):
    """Opening the comparison decides it (the gate blocks); the run list then flags the head,
    its flag links to that comparison; the comparison and the suite's grid name the grader's
    changed config."""
    graders = [{"key": "judge", "kind": "contains", "config": {"value": "x"}}]
    base = db_run({f"c{i}": "PPPPP" for i in range(8)}, name="base", graders=graders)
    head = db_run(
        {f"c{i}": "FFFFF" for i in range(8)},
        name="head",
        graders=[{"key": "judge", "kind": "contains", "config": {"value": "y"}}],
    )
    Baseline.objects.create(suite=base.suite, run=base)
    page = browser_page
    log_in(page, live_server, bob.username)
    assert page.locator("a.not-compared").count() == 1  # nobody decided it yet
    assert page.locator(".badge.baseline").count() == 1
    page.click("a.not-compared")
    page.wait_for_selector("#gate-decision[data-verdict=block]")
    assert '{"value": "y"}' in page.inner_text("#target-diff .grader-changes")

    page.goto(f"{live_server.url}/runs/")
    flag = page.locator("a.regression")
    assert flag.inner_text() == "regression"
    flag.click()
    page.wait_for_url(re.compile(rf".*/runs/{head.uuid}/compare/{base.uuid}/$"))

    page.goto(f"{live_server.url}/suites/{base.suite.uuid}/grid/")
    warning = page.locator("#grid-grader-warning")
    assert "'base' configures judge differently" in warning.inner_text()
    assert page.console_errors == [] and page.dialogs == []
