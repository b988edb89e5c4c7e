"""docs/providers/azure.md's and docs/providers/openai-compatible.md's configs run as written
against the shared mock, only their URLs pointed at it (Azure's through the test-side Azure
front): each page's TOML applied with ``apply_config``, each target preset run by ``run_suite
--target-preset``, each JSON target by ``run_suite --target``, each judge by ``judge_run``, all
with the passes and verdicts the mock's policy predicts."""

from __future__ import annotations

import json
import re
import tomllib
from io import StringIO

import httpx
import pytest
from django.core.management import call_command

from evals.models import Case, Run, Suite, TargetPreset, Trial
from evals.runner.targets.openai import OpenAIConfig
from judges.models import JudgeRun
from tests.azure_front import AzureFront
from tests.conftest import PROJECT_DIR
from tests.evals.test_targets_azure import passes, predicted, run_suite, suite_with
from tests.judges.test_judge_azure import _judge_run
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

DOCS = PROJECT_DIR / "docs" / "providers"
GRADERS = [{"key": "exact", "kind": "exact"}]
KEY = "azure-docs-test-key"
PS = [1.0, 0.5, 0.25]


def _block(page: str, language: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", (DOCS / page).read_text(), re.DOTALL)
    assert len(blocks) == 1, f"{page} has one {language} block"
    return blocks[0]


def _graders(tmp_path) -> str:
    path = tmp_path / "graders.json"
    path.write_text(json.dumps(GRADERS))
    return str(path)


def _run_preset(suite: Suite, preset: str, graders: str, trials: int = 2) -> Run:
    code, summary = run_suite(
        suite.name, "--target-preset", preset, "--graders", graders, "--trials", str(trials)
    )
    run = Run.objects.get(uuid=summary["run"])
    assert (code, run.trials_errored) == (0, 0), run.error_message
    return run


def _judged_run(n: int) -> Run:
    """A finished run of ``n`` cases carrying the mock's marker and no expected answer (the
    rubric prompt would show it to the mock's judge), odd ones answering the marker's token."""
    suite = Suite.objects.create(name="judged")
    run = Run.objects.create(
        suite=suite, name="judged", target_kind="callable", status=Run.Status.SUCCEEDED
    )
    for i in range(n):
        key = f"m{i:02d}"
        case = Case.objects.create(
            suite=suite, key=key, input=f"[case={key} p=0.5 expect=ANSWER-{key}] Capital?"
        )
        output = f"ANSWER-{key}" if i % 2 else "WRONG"
        Trial.objects.create(run=run, case=case, attempt=1, status="ok", output=output)
    return run


def _verdicts_as_predicted(run: Run, judge: str) -> None:
    code, out = _judge_run(str(run.uuid), judge)
    judge_run = JudgeRun.objects.get(run=run)
    assert (code, judge_run.status, judge_run.trials_errored) == (0, "succeeded", 0), out
    grader = judge_run.grader
    pairs = sorted(
        (t.output != "WRONG", t.grades.get(grader=grader).passed) for t in run.trials.all()
    )
    assert pairs == [(False, False), (False, False), (True, True), (True, True)]


def test_the_azure_pages_configs_run_as_written(mockllm, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    server = mockllm("--latency-ms", "1", "--judge-flip", "0")
    # The deployments serve what the page names; the judge's a model the mock judges with.
    deployments = {"gpt-4o-mini": "gpt-4o-mini-2024-07-18", "gpt-4o-judge": "gpt-4o-judge-0806"}
    suite = suite_with("azure", PS)
    graders = _graders(tmp_path)
    official = "https://my-resource.openai.azure.com"
    toml = _block("azure.md", "toml")
    document = tomllib.loads(toml)
    with AzureFront(server.base_url, deployments=deployments, api_key=KEY) as front:
        config = tmp_path / "assay.toml"
        config.write_text(toml.replace(official, front.base_url))
        call_command("apply_config", str(config), stdout=StringIO())
        [(name, declared)] = document["targets"].items()
        assert TargetPreset.objects.get(name=name).config == {
            **declared,
            "base_url": front.base_url,
        }
        assert passes(_run_preset(suite, name, graders)) == predicted(suite, 2)

        httpx.post(f"{server.root}/admin/reset", timeout=5).raise_for_status()
        target = json.loads(_block("azure.md", "json"))
        assert target == declared
        path = tmp_path / "target.json"
        path.write_text(json.dumps({**target, "base_url": front.base_url}))
        code, summary = run_suite(suite.name, "--target", str(path), "--graders", graders)
        assert code == 0
        assert passes(Run.objects.get(uuid=summary["run"])) == predicted(suite, 5)

        [judge] = document["judges"]
        _verdicts_as_predicted(_judged_run(4), judge["name"])
    assert {r["path"].split("/")[3] for r in front.requests} == set(deployments)
    assert {r["headers"]["api-key"] for r in front.requests} == {KEY}


def test_the_openai_compatible_pages_configs_run_as_written(mockllm, monkeypatch, tmp_path):  # noqa: F811
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "TOGETHER_API_KEY"):
        monkeypatch.setenv(name, "test-key")
    server = mockllm("--latency-ms", "1")
    judge_server = mockllm("--latency-ms", "1", "--mode", "judge", "--judge-flip", "0")
    suite = suite_with("compatible", PS)
    graders = _graders(tmp_path)
    toml = _block("openai-compatible.md", "toml")
    document = tomllib.loads(toml)
    targets_part, judges_part = toml.split("[[judges]]")
    for url in {t["base_url"] for t in document["targets"].values()}:
        targets_part = targets_part.replace(f'"{url}"', f'"{server.base_url}"')
    [judge] = document["judges"]
    judges_part = judges_part.replace(judge["base_url"], judge_server.base_url)
    config = tmp_path / "assay.toml"
    config.write_text(f"{targets_part}[[judges]]{judges_part}")
    call_command("apply_config", str(config), stdout=StringIO())

    keyless = set()
    for name, declared in document["targets"].items():
        preset = TargetPreset.objects.get(name=name).config
        assert preset == {**declared, "base_url": server.base_url}
        if OpenAIConfig.parse(preset).api_key_env is None:
            keyless.add(name)
        httpx.post(f"{server.root}/admin/reset", timeout=5).raise_for_status()
        assert passes(_run_preset(suite, name, graders)) == predicted(suite, 2), name
    assert keyless == {"vllm", "ollama", "llamacpp"}

    httpx.post(f"{server.root}/admin/reset", timeout=5).raise_for_status()
    target = json.loads(_block("openai-compatible.md", "json"))
    assert target["api_key_env"] is None and target == {
        **document["targets"]["ollama"],
        "api_key_env": None,
    }
    monkeypatch.delenv("OPENAI_API_KEY")
    path = tmp_path / "target.json"
    path.write_text(json.dumps({**target, "base_url": server.base_url}))
    code, summary = run_suite(suite.name, "--target", str(path), "--graders", graders)
    assert code == 0
    assert passes(Run.objects.get(uuid=summary["run"])) == predicted(suite, 5)

    _verdicts_as_predicted(_judged_run(4), judge["name"])
