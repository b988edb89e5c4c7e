"""An experiment in real Chromium: started from a run's page with four variants (rows added in
the page), run (eager Celery), decided on its page; the grid is reached with Tab and opens the
case's outputs side by side."""

from __future__ import annotations

import json
import re

import pytest

from evals.experiments.decision import experiment_decision
from evals.models import Case, Experiment, Run, Suite
from tests.browser.conftest import log_in
from tests.experiment_builders import experiment_built

GRADERS = [{"key": "says-expected", "kind": "contains", "config": {}}]
# Clearly different pass probabilities: the strongest is alone in the best set.
VARIANTS = [("baseline", 0.97), ("second", 0.5), ("third", 0.2), ("fourth", 0.03)]


def experiment_sentence(experiment: Experiment) -> str:
    return experiment_decision(experiment=experiment).sentence


pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def test_an_engineer_starts_four_variants_from_a_run_and_reads_the_decision(
    browser_page, live_server, carol
):
    page = browser_page
    suite = Suite.objects.create(name="arith")
    Case.objects.bulk_create(
        Case(suite=suite, key=f"c{i:02d}", input=f"What is {i}+{i}?", expected=str(2 * i))
        for i in range(20)
    )
    source = Run.objects.create(
        suite=suite,
        name="nightly",
        target_kind="simulated",
        target={"kind": "simulated", "seed": 5, "default_pass_probability": 0.5},
        graders=GRADERS,
        trials_per_case=3,
        status=Run.Status.SUCCEEDED,
    )
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}{source.get_absolute_url()}")
    page.click("#run-experiment-new")
    page.wait_for_url(re.compile(r".*/experiments/new/\?like="))
    assert json.loads(page.input_value("#id_base_target"))["seed"] == 5
    assert page.input_value("#id_trials_per_case") == "3"
    page.fill("#id_name", "four ways")
    page.click("button.variant-add")
    page.click("button.variant-add")
    assert page.locator("fieldset.variant-row").count() == 4
    for i, (label, p) in enumerate(VARIANTS):
        page.fill(f"#id_variants-{i}-label", label)
        page.fill(f"#id_variants-{i}-other_json", json.dumps({"default_pass_probability": p}))
    page.click("button:has-text('Start experiment')")

    experiment = Experiment.objects.get(name="four ways")
    page.wait_for_url(f"{live_server.url}{experiment.get_absolute_url()}", timeout=30_000)
    page.wait_for_selector("#experiment-sentence", timeout=30_000)
    sentence = page.inner_text("#experiment-sentence")
    assert sentence.startswith("baseline") and sentence == experiment_sentence(experiment)
    out = page.inner_text('#experiment-variants tr[data-variant="fourth"]')
    assert "is out" in out and "baseline" in out  # why it is out, and against whom
    assert page.locator("#experiment-best .badge").all_inner_texts() == ["baseline"]
    assert page.locator("#pareto-table tbody tr").count() == 4
    # The simulated target has no price: no point can be drawn, each is named and tabled.
    assert "baseline, second, third, fourth" in page.inner_text("#pareto-left-out")
    assert page.locator("#experiment-variants tbody tr").count() == 4
    assert page.locator("#experiment-grid-table tbody tr").count() == 20
    assert page.locator("#experiment-grid-table thead th").count() == 2 + 4

    # Keyboard: Tab reaches a grid cell, and Enter opens its case across the variants.
    page.locator("body").focus()
    for _ in range(300):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('grid-cell')"):
            break
    else:
        pytest.fail("Tab never reached a grid cell")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/experiments/.+/cases/.+/$"))
    assert page.locator("#experiment-case-table thead th[data-variant]").count() == 4
    assert page.locator("#experiment-case-table tbody tr[data-attempt]").count() == 3
    assert page.locator("#experiment-case-table article.trial").count() == 4 * 3
    assert page.dialogs == []
    assert page.console_errors == []


def test_the_decision_swaps_in_when_the_last_variant_ends_while_the_page_watches(
    browser_page, live_server, carol
):
    experiment = experiment_built(
        labels=["left", "right"], n_cases=6, trials=2, passes=lambda v, i, a: v == 0
    )
    runs = Run.objects.filter(experiment_variant__experiment=experiment)
    runs.update(status=Run.Status.RUNNING)
    page = browser_page
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}{experiment.get_absolute_url()}")
    page.wait_for_selector("#experiment-waiting")
    assert page.locator("#experiment-sentence").count() == 0
    runs.update(status=Run.Status.SUCCEEDED)
    page.wait_for_selector("#experiment-sentence", timeout=20_000)  # no reload: htmx swapped it
    assert page.locator("#experiment-waiting").count() == 0
    assert page.locator("#experiment-grid-table tbody tr").count() == 6
    assert page.console_errors == []
