"""A model target with ``"provider": "anthropic"`` run end to end through ``run_suite``
(eager Celery) against the shared mock's ``POST /v1/messages``: the predicted passes, its key
and version headers, a 529 retried, a refused setting, and docs/providers/anthropic.md's
configs as written (config as code and the API's JSON)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from io import StringIO

import httpx
import pytest
from django.core.management import call_command

from evals.models import Case, Run, Suite, TargetPreset, Trial
from tests.conftest import PROJECT_DIR
from tests.mockllm import MOCKLLM, mockllm  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# transaction=True: on_commit fires for real, so the eager chunk tasks execute as in production.

DOC = PROJECT_DIR / "docs" / "providers" / "anthropic.md"
GRADERS = [{"key": "exact", "kind": "exact"}]
SEED = 1234  # the mock's default
TRIALS = 4
KEY = "test-anthropic-key"


def _mock_policy():
    """The mock's ``expected_outcome(seed, case, n, p)``, imported from its file."""
    if not MOCKLLM.exists():
        pytest.skip(f"shared mock not found: {MOCKLLM}")
    spec = importlib.util.spec_from_file_location("assay_mockllm_server", MOCKLLM)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module.expected_outcome


def _suite(name: str, ps: list[float]) -> Suite:
    suite = Suite.objects.create(name=name)
    for i, p in enumerate(ps):
        key = f"c{i:02d}"
        Case.objects.create(
            suite=suite,
            key=key,
            input=f"[case={key} p={p} expect=A-{key}] Q{i}",
            expected=f"A-{key}",
        )
    return suite


def _predicted(suite: Suite, trials: int) -> int:
    """Passes the mock's policy predicts for ``trials`` answers of each of the suite's cases."""
    expected_outcome = _mock_policy()
    total = 0
    for case in Case.objects.filter(suite=suite):
        key, p = re.search(r"\[case=(\S+) p=([0-9.]+)", case.input).groups()
        total += sum(expected_outcome(SEED, key, n, float(p)) for n in range(trials))
    return total


def _run_suite(*args: str) -> tuple[int, dict]:
    out = StringIO()
    try:
        call_command("run_suite", *args, "--wait", "--json", stdout=out)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, json.loads(out.getvalue())


def _passes(run: Run) -> int:
    return Trial.objects.filter(run=run, grades__grader="exact", grades__passed=True).count()


def _target(base_url: str, **extra) -> dict:
    return {
        "kind": "openai",
        "provider": "anthropic",
        "base_url": base_url,
        "model": "mock-model",
        "api_key_env": "ASSAY_ANTHROPIC_TEST_API_KEY",
        "prompt_template": "$input",
        "system_prompt": "Answer with the token only.",
        "settings": {"max_tokens": 64, "temperature": 0},
        **extra,
    }


def _doc_block(language: str) -> str:
    text = DOC.read_text()
    blocks = re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1, f"{DOC.name} has one {language} block"
    return blocks[0]


def test_a_run_through_run_suite_gets_the_predicted_passes_with_key_and_version_sent(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    """The mock refuses a call without ``anthropic-version`` or with another key (401), so
    every trial answered means both were sent."""
    monkeypatch.setenv("ASSAY_ANTHROPIC_TEST_API_KEY", KEY)
    server = mockllm("--latency-ms", "1", "--anthropic-api-key", KEY)
    suite = _suite("claude", [1.0, 0.7, 0.5, 0.2, 0.0, 0.9])
    target = tmp_path / "target.json"
    target.write_text(json.dumps(_target(server.base_url)))
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))

    code, summary = _run_suite(
        "claude", "--target", str(target), "--graders", str(graders), "--trials", str(TRIALS)
    )

    run = Run.objects.get(uuid=summary["run"])
    assert (code, run.status, run.trials_errored) == (0, Run.Status.SUCCEEDED, 0)
    assert run.target["provider"] == "anthropic"
    assert _passes(run) == _predicted(suite, TRIALS)
    stats = server.stats()
    assert stats["by_api"]["anthropic"]["requests"] == 6 * TRIALS
    assert stats["by_api"]["openai"]["requests"] == 0
    trial = Trial.objects.filter(run=run).first()
    assert trial.input_tokens > 0 and trial.output_tokens > 0
    assert trial.raw_response["stop_reason"] == "end_turn"
    assert trial.raw_response["usage"]["cache_read_input_tokens"] == 0
    assert trial.cost_usd is None  # mock-model has no price


def test_a_wrong_key_is_a_client_error_401_in_the_providers_words(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    monkeypatch.setenv("ASSAY_ANTHROPIC_TEST_API_KEY", "another-key")
    server = mockllm("--latency-ms", "1", "--anthropic-api-key", KEY)
    _suite("claude", [1.0])
    target = tmp_path / "target.json"
    target.write_text(json.dumps(_target(server.base_url)))
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))

    code, summary = _run_suite("claude", "--target", str(target), "--graders", str(graders))

    run = Run.objects.get(uuid=summary["run"])
    assert code == 1 and run.status == Run.Status.FAILED
    trial = Trial.objects.filter(run=run).first()
    assert trial.error_message == "client_error 401: invalid x-api-key"


def test_529_overloaded_answers_are_retried_and_the_passes_are_still_the_predicted(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    monkeypatch.setenv("ASSAY_ANTHROPIC_TEST_API_KEY", KEY)
    server = mockllm("--latency-ms", "1", "--p529", "0.3")
    suite = _suite("claude", [1.0, 0.6, 0.3, 0.8])
    target = tmp_path / "target.json"
    config = _target(server.base_url, max_attempts=20, backoff_base_s=0.001, backoff_max_s=0.01)
    target.write_text(json.dumps(config))
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))

    code, summary = _run_suite(
        "claude", "--target", str(target), "--graders", str(graders), "--trials", str(TRIALS)
    )

    run = Run.objects.get(uuid=summary["run"])
    assert (code, run.trials_errored) == (0, 0)
    assert _passes(run) == _predicted(suite, TRIALS)
    status = server.stats()["by_api"]["anthropic"]["status"]
    assert int(status.get("529", 0)) > 0


def test_a_setting_the_api_refuses_fails_the_run_once_naming_it(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    monkeypatch.setenv("ASSAY_ANTHROPIC_TEST_API_KEY", KEY)
    server = mockllm("--latency-ms", "1")
    _suite("claude", [1.0] * 5)
    target = tmp_path / "target.json"
    config = _target(server.base_url, concurrency=1, settings={"max_tokens": 64, "seed": 3})
    target.write_text(json.dumps(config))
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))

    code, summary = _run_suite(
        "claude", "--target", str(target), "--graders", str(graders), "--trials", "2"
    )

    run = Run.objects.get(uuid=summary["run"])
    assert code == 1 and run.status == Run.Status.FAILED
    assert run.error_message == (
        "10 of 10 trials errored: rejected_parameter: model 'mock-model' refuses parameter "
        "'seed': seed: Extra inputs are not permitted"
    )
    assert server.stats()["by_api"]["anthropic"]["requests"] == 1


def test_the_docs_pages_configs_run_against_the_mock_as_written(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    """The page's TOML applied with ``apply_config`` and run by ``run_suite --target-preset``,
    and its JSON run by ``run_suite --target``, only ``base_url`` pointed at the mock: the key
    read from ``ANTHROPIC_API_KEY``, the predicted passes both times."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = mockllm("--latency-ms", "1", "--anthropic-api-key", KEY)
    suite = _suite("claude", [1.0, 0.5, 0.25])
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))
    official = "https://api.anthropic.com/v1"

    toml = _doc_block("toml")
    assert official in toml
    config = tmp_path / "assay.toml"
    config.write_text(toml.replace(official, server.base_url))
    call_command("apply_config", str(config), stdout=StringIO())
    preset = TargetPreset.objects.get(name="claude")
    assert preset.config == {
        **tomllib.loads(toml)["targets"]["claude"],
        "base_url": server.base_url,
    }
    code, summary = _run_suite(
        "claude", "--target-preset", "claude", "--graders", str(graders), "--trials", "3"
    )
    assert code == 0
    assert _passes(Run.objects.get(uuid=summary["run"])) == _predicted(suite, 3)

    httpx.post(f"{server.root}/admin/reset", timeout=5).raise_for_status()
    document = json.loads(_doc_block("json"))
    assert document == tomllib.loads(toml)["targets"]["claude"]
    target = tmp_path / "target.json"
    target.write_text(json.dumps({**document, "base_url": server.base_url}))
    code, summary = _run_suite(
        "claude", "--target", str(target), "--graders", str(graders), "--trials", "3"
    )
    assert code == 0
    assert _passes(Run.objects.get(uuid=summary["run"])) == _predicted(suite, 3)
    assert server.stats()["by_api"]["anthropic"]["requests"] == 9


def test_the_docs_pages_tool_loop_config_runs_against_the_mock_as_written(
    mockllm,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    """The page's ``claude-agent`` preset (the demo's refund tools) applied and run by
    ``run_suite``, only ``base_url`` pointed at the mock, whose scripted agent
    (``MOCK_AGENT:correct`` in the case's message) calls the first two tools with made-up
    arguments: the demo's world refuses order ``"mock"`` (failed steps the model is told),
    then the agent gives the predicted answer."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = mockllm("--latency-ms", "1", "--anthropic-api-key", KEY)
    suite = Suite.objects.create(name="claude-agent")
    cases = {"a1": ("A100", 1.0), "a2": ("A103", 0.5), "a3": ("A104", 0.2)}
    for key, (order, p) in cases.items():
        message = f"[case={key} p={p} expect=A-{key}] MOCK_AGENT:correct Refund order {order}."
        Case.objects.create(
            suite=suite,
            key=key,
            input={"order_id": order, "message": message},
            expected=f"A-{key}",
        )
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))
    official = "https://api.anthropic.com/v1"
    toml = _doc_block("toml")
    config = tmp_path / "assay.toml"
    config.write_text(toml.replace(official, server.base_url))
    call_command("apply_config", str(config), stdout=StringIO())
    assert TargetPreset.objects.get(name="claude-agent").config == {
        **tomllib.loads(toml)["targets"]["claude-agent"],
        "base_url": server.base_url,
    }

    code, summary = _run_suite(
        "claude-agent",
        "--target-preset",
        "claude-agent",
        "--graders",
        str(graders),
        "--trials",
        "2",
    )

    run = Run.objects.get(uuid=summary["run"])
    assert (code, run.trials_errored) == (0, 0)
    expected_outcome = _mock_policy()
    predicted = sum(
        expected_outcome(SEED, key, n, p) for key, (_, p) in cases.items() for n in range(2)
    )
    assert _passes(run) == predicted
    refused = "KeyError: \"no order 'mock' for this customer\""
    for trial in Trial.objects.filter(run=run).select_related("case"):
        assert [(s["kind"], s.get("name"), s.get("status")) for s in trial.trajectory] == [
            ("tool_call", "lookup_order", None),
            ("tool_result", "lookup_order", "error"),
            ("tool_call", "issue_refund", None),
            ("tool_result", "issue_refund", "error"),
            ("message", None, None),
        ]
        assert trial.trajectory[1]["content"] == refused
        assert trial.trajectory[0]["id"].startswith("toolu_mock_")
        assert trial.final_state["refunds"] == [] and trial.final_state["escalations"] == []
        assert [t["name"] for t in trial.request["tools"]] == [
            "lookup_order",
            "issue_refund",
            "escalate",
        ]
        assert trial.request["tools"][0]["input_schema"]["required"] == ["order_id"]
        assert trial.raw_response["last_reply"]["stop_reason"] == "end_turn"
    stats = server.stats()
    assert stats["by_api"]["anthropic"]["requests"] == 3 * 2 * 3  # cases x trials x turns
    assert stats["agent"]["tool_calls"] == 3 * 2 * 2
