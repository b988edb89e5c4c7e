"""An experiment of two model variants against the shared mock endpoint, started in Chromium:
each variant calls its own mock (one answers right 95% of the time, the other 10%), the
passes are the mock's policy's, and the page puts the strong one alone in the best set."""

from __future__ import annotations

import json

import pytest

from evals.models import Case, Experiment, Run, Suite, Trial
from tests.browser.conftest import log_in
from tests.mockllm import MOCK_SEED, mock_module, mockllm  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

GRADERS = [{"key": "exact", "kind": "exact"}]
TRIALS = 2


def _predicted(keys: list[str], p: float) -> int:
    outcome = mock_module().expected_outcome
    return sum(outcome(MOCK_SEED, key, n, p) for key in keys for n in range(TRIALS))


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
        Case(suite=suite, key=key, input=f"[case={key} expect=A-{key}] Q", expected=f"A-{key}")
        for key in keys
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
            "prompt_template": "$input",
            "settings": {"temperature": 0},
        },
        graders=GRADERS,
        trials_per_case=TRIALS,
        status=Run.Status.SUCCEEDED,
    )
    page = browser_page
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/experiments/new/?like={source.uuid}")
    page.fill("#id_name", "mocked pair")
    page.fill("#id_variants-0-label", "strong")
    page.fill("#id_variants-1-label", "weak")
    page.fill("#id_variants-1-prompt_template", "Please answer: $input")
    page.fill("#id_variants-1-other_json", json.dumps({"base_url": weak.base_url}))
    page.click("button:has-text('Start experiment')")

    experiment = Experiment.objects.get(name="mocked pair")
    page.wait_for_url(f"{live_server.url}{experiment.get_absolute_url()}", timeout=30_000)
    page.wait_for_selector("#experiment-sentence", timeout=30_000)
    assert page.locator("#experiment-best .badge").all_inner_texts() == ["strong"]
    for label, p, server in (("strong", 0.95, strong), ("weak", 0.1, weak)):
        run = experiment.variants.get(label=label).run
        passes = Trial.objects.filter(run=run, grades__grader="exact", grades__passed=True)
        assert passes.count() == _predicted(keys, p)
        assert server.stats()["requests"] == len(keys) * TRIALS
    weak_run = experiment.variants.get(label="weak").run
    assert weak_run.target["prompt_template"] == "Please answer: $input"
    assert page.console_errors == [] and page.dialogs == []
