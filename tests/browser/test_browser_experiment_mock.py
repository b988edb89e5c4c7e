"""An experiment of four model variants against the shared mock endpoint, started in Chromium:
two call a mock that answers right 95% of the time, two a mock at 10% (each variant's
template names its own mock marker, so every variant × case has its own answer sequence), the
passes are the mock's policy's, the page keeps only strong variants in the best set, and with
the model priced the Pareto chart draws every variant as a focusable mark."""

from __future__ import annotations

import json

import pytest

from evals.models import Case, Experiment, Run, Suite, Trial
from providers.models import ModelPrice
from tests.browser.conftest import log_in
from tests.mockllm import MOCK_SEED, mock_module, mockllm  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

GRADERS = [{"key": "exact", "kind": "exact"}]
TRIALS = 2


def _predicted(keys: list[str], p: float, suffix: str = "") -> int:
    outcome = mock_module().expected_outcome
    return sum(outcome(MOCK_SEED, key + suffix, n, p) for key in keys for n in range(TRIALS))


def test_two_model_variants_against_the_mock_are_decided_on_the_page(
    browser_page,
    live_server,
    carol,
    mockllm,  # noqa: F811
):
    strong = mockllm("--latency-ms", "1", "--default-pass-prob", "0.95")
    weak = mockllm("--latency-ms", "1", "--default-pass-prob", "0.1")
    suite = Suite.objects.create(name="mocked")
    keys = [f"c{i:02d}" for i in range(25)]
    Case.objects.bulk_create(
        Case(suite=suite, key=key, input="Q", expected=f"A-{key}") for key in keys
    )
    ModelPrice.objects.create(
        model="mock-model", input_usd_per_mtok="0.15", output_usd_per_mtok="0.60"
    )
    source = Run.objects.create(
        suite=suite,
        name="nightly",
        target_kind="openai",
        target={
            "kind": "openai",
            "base_url": strong.base_url,
            "model": "mock-model",
            "api_key_env": None,
            "prompt_template": "[case=$key expect=$expected] $input",
            "settings": {"temperature": 0},
        },
        graders=GRADERS,
        trials_per_case=TRIALS,
        status=Run.Status.SUCCEEDED,
    )
    page = browser_page
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/experiments/new/?like={source.uuid}")
    page.fill("#id_name", "mocked four")
    page.click("button.variant-add")
    page.click("button.variant-add")
    assert page.locator("fieldset.variant-row").count() == 4
    for i, (label, server) in enumerate(VARIANTS_OF(strong, weak)):
        page.fill(f"#id_variants-{i}-label", label)
        page.fill(
            f"#id_variants-{i}-prompt_template", f"[case=$key-{label} expect=$expected] $input"
        )
        page.fill(f"#id_variants-{i}-other_json", json.dumps({"base_url": server.base_url}))
    page.click("button:has-text('Start experiment')")

    experiment = Experiment.objects.get(name="mocked four")
    page.wait_for_url(f"{live_server.url}{experiment.get_absolute_url()}", timeout=30_000)
    page.wait_for_selector("#experiment-sentence", timeout=30_000)
    best = set(page.locator("#experiment-best .badge").all_inner_texts())
    assert best and best <= {"strong", "strong-2"}
    for label, server in VARIANTS_OF(strong, weak):
        p = 0.95 if server is strong else 0.1
        run = experiment.variants.get(label=label).run
        passes = Trial.objects.filter(run=run, grades__grader="exact", grades__passed=True)
        assert passes.count() == _predicted(keys, p, f"-{label}")
        assert run.target["prompt_template"].startswith(f"[case=$key-{label} ")
        assert run.trials_errored == 0
    assert strong.stats()["requests"] == weak.stats()["requests"] == 2 * len(keys) * TRIALS

    # Priced: every variant is a mark of the Pareto chart, reachable by keyboard, with its table.
    chart = page.locator("#experiment-pareto svg[role='img']")
    assert chart.count() == 1
    marks = chart.locator("[tabindex='0']")
    assert marks.count() == 4
    marks.first.focus()
    assert page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert page.locator("#pareto-table tbody tr").count() == 4
    assert page.console_errors == [] and page.dialogs == []


def VARIANTS_OF(strong, weak):  # noqa: N802 - read as a table
    return (("strong", strong), ("weak", weak), ("strong-2", strong), ("weak-2", weak))
