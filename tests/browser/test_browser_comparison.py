"""Browser test of the comparison flow: an engineer sets a baseline from the run page, starts
a changed (simulated) run from the UI, opens the comparison, filters to broken cases and
opens one case's diff. Same Chromium rule as tests/browser/test_browser.py (skip without it, fail
under CI=true)."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from evals.models import Baseline, Case, Run, Suite, Trial
from tests.browser.conftest import HOSTILE_OUTPUT, HOSTILE_RUN_NAME, log_in
from tests.comparison_builders import db_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

GRADERS = [{"key": "says-expected", "kind": "contains", "config": {}}]
# As tests/browser/test_browser.py's INJECTED, but the pages' own SVG charts are expected: an
# injected svg is one carrying a handler.
INJECTED = "img[onerror], b[onclick], svg[onload], script:not([src])"


def start_simulated_run(
    page, live_server, suite: Suite, name: str, seed: int, pass_probability: float
) -> Run:
    page.goto(f"{live_server.url}/runs/new/")
    page.select_option("#id_suite", str(suite.uuid))
    page.fill("#id_name", name)
    page.check("input[name=target_kind][value=simulated]")
    page.fill("#id_seed", str(seed))
    page.fill("#id_pass_probability", str(pass_probability))
    page.fill("#id_trials_per_case", "3")
    page.fill("#id_graders", json.dumps(GRADERS))
    page.click("button:has-text('Start run')")
    run = Run.objects.get(suite=suite, name=name)
    page.wait_for_url(f"{live_server.url}{run.get_absolute_url()}")
    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=30_000)
    return run


def test_an_engineer_sets_a_baseline_runs_a_change_and_reads_a_broken_case_diff(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    carol,
):
    page = browser_page
    suite = Suite.objects.create(name="arith-regression", kind=Suite.Kind.REGRESSION)
    for i in range(8):
        Case.objects.create(
            suite=suite,
            key=f"c{i + 1}",
            input=f"What is {i}+{i}?",
            expected=str(2 * i),
            tags=["even" if i % 2 == 0 else "odd"],
        )
    log_in(page, live_server, "carol")

    base = start_simulated_run(page, live_server, suite, "base run", seed=1, pass_probability=1.0)
    page.click("#set-baseline")
    page.wait_for_selector("text=This run is the current baseline")
    assert Baseline.objects.get(suite=suite).run == base

    head = start_simulated_run(
        page, live_server, suite, "changed run", seed=7, pass_probability=0.3
    )
    page.click("#compare-with-baseline")
    page.wait_for_url(re.compile(rf".*/runs/{head.uuid}/compare/{base.uuid}/$"))
    assert "broken" in page.inner_text("#change-counts")

    page.click("#case-filters a[data-change=broken]")
    page.wait_for_selector("#case-table[data-change=broken]")
    assert re.search(r"change=broken", page.url)  # a real, shareable URL
    classes = page.locator("#case-table tbody td.change").all_inner_texts()
    assert classes and set(classes) == {"broken"}

    page.locator("#case-table tbody a.case-diff").first.click()
    page.wait_for_url(re.compile(rf".*/runs/{head.uuid}/compare/{base.uuid}/cases/.+/$"))
    assert page.locator(".trial-pair").count() == 3
    assert page.locator(".side.head .diff-ins").count() >= 1
    assert page.locator(INJECTED).count() == 0
    assert page.dialogs == []
    assert page.console_errors == []

    # The suite page draws its trend as server-rendered SVG under the CSP, the baseline ringed.
    page.goto(f"{live_server.url}/suites/{suite.uuid}/")
    assert "Current baseline: base run" in page.inner_text("#baseline")
    assert page.locator("figure.trend-chart g.trend-run").count() == 2
    assert page.locator("figure.trend-chart g.trend-run.baseline").count() == 1
    assert page.console_errors == []


def test_hostile_text_is_inert_on_the_comparison_and_case_pages(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    bob,
):
    """Fault I1 on the comparison pages: run name, tag and output stay literal text."""

    page = browser_page
    base = db_run({"c1": "PP", "c2": "PF"}, name="base")
    head = db_run({"c1": "FP", "c2": "PF"}, name=HOSTILE_RUN_NAME)
    Case.objects.filter(key="c1").update(tags=['"><svg onload=alert(3)>'])
    Trial.objects.filter(run=head, case__key="c1").update(output=HOSTILE_OUTPUT)
    c1 = Case.objects.get(key="c1")
    log_in(page, live_server, "bob")
    for url in (
        reverse("evals:comparison", args=[head.uuid, base.uuid]),
        reverse("evals:comparison-case", args=[head.uuid, base.uuid, c1.uuid]),
        reverse("evals:suite-detail", args=[base.suite.uuid]),
    ):
        page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("networkidle")
        assert page.locator(INJECTED).count() == 0, url
        page.hover("h1")
        assert page.dialogs == [], url
        assert page.console_errors == [], url
    case_page = reverse("evals:comparison-case", args=[head.uuid, base.uuid, c1.uuid])
    page.goto(f"{live_server.url}{case_page}")
    assert HOSTILE_OUTPUT in page.inner_text(".side.head .diff-ins")
