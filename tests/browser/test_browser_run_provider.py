"""Browser test of the start form's provider field: an engineer picks Anthropic for a model
target (its own field shown, Azure's hidden), is told on the Settings field that Anthropic needs
``max_tokens``, adds it, and the run against the shared mock's Messages API gets the passes the
mock's policy predicts. Same Chromium rule as tests/browser/test_browser.py."""

from __future__ import annotations

import json

import pytest

from evals.models import Run, Trial
from tests.browser.conftest import log_in
from tests.evals.test_targets_anthropic import _predicted, _suite
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

KEY = "browser-anthropic-key"
GRADERS = [{"key": "exact", "kind": "exact"}]


def test_an_engineer_starts_an_anthropic_run_from_the_form(
    browser_page,
    live_server,
    carol,
    mockllm,  # noqa: F811
    monkeypatch,
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # the provider's default variable
    server = mockllm("--latency-ms", "1", "--anthropic-api-key", KEY)
    suite = _suite("claude", [1.0, 0.6, 0.3])
    page = browser_page
    log_in(page, live_server, carol.username)

    page.goto(f"{live_server.url}/runs/new/")
    page.select_option("#id_suite", str(suite.uuid))
    page.fill("#id_name", "from the form")
    page.check("input[name=target_kind][value=openai]")
    assert page.is_visible("#id_provider")
    assert not page.is_visible("#id_anthropic_version")
    assert not page.is_visible("#id_deployment")
    page.select_option("#id_provider", "anthropic")
    assert page.is_visible("#id_anthropic_version")
    assert not page.is_visible("#id_deployment") and not page.is_visible("#id_api_version")
    page.fill("#id_base_url", server.base_url)
    page.fill("#id_model", "mock-model")
    page.fill("#id_prompt_template", "$input")
    page.fill("#id_settings_json", '{"temperature": 0}')
    page.fill("#id_trials_per_case", "2")
    page.fill("#id_graders", json.dumps(GRADERS))
    page.click("button:has-text('Start run')")

    page.wait_for_selector("#id_settings_json_error")
    assert "required by Anthropic's Messages API" in page.inner_text("#id_settings_json_error")
    assert not Run.objects.exists()
    assert page.input_value("#id_provider") == "anthropic"  # kept, its field still shown
    assert page.is_visible("#id_anthropic_version")

    page.fill("#id_settings_json", '{"max_tokens": 64, "temperature": 0}')
    page.click("button:has-text('Start run')")
    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=30_000)

    run = Run.objects.get(name="from the form")
    assert run.target["provider"] == "anthropic" and "api_key_env" not in run.target
    passes = Trial.objects.filter(run=run, grades__grader="exact", grades__passed=True).count()
    assert passes == _predicted(suite, 2)
    assert server.stats()["by_api"]["anthropic"]["requests"] == 3 * 2
    assert page.console_errors == [] and page.dialogs == []
