"""An ``azure`` target on every path a target config takes: the API's start (a bad one a 400
naming the field), config as code (errors under the preset's table), a target file given to
``run_suite`` (its error naming the field), run files and a replay reading the key variable an
``azure`` target names."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Run, Suite
from evals.presets import target_preset_apply
from evals.runner.replay import run_replay_refusal
from interop.run_file import run_export
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "exact", "kind": "exact"}]


def _target(**extra) -> dict:
    target = {
        "kind": "openai",
        "provider": "azure",
        "base_url": "http://127.0.0.1:9",
        "deployment": "gpt-4o-mini",
        "api_version": "2024-10-21",
        "model": "gpt-4o-mini",
        "prompt_template": "$input",
        **extra,
    }
    return {k: v for k, v in target.items() if v is not None}


def _suite() -> Suite:
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c", input="q", expected="a")
    return suite


BAD = [
    ("b", _target(deployment="a/../b"), "target.deployment"),
    ("c", _target(api_version=None), "target.api_version"),
    ("d", _target(provider="openai"), "target.deployment"),
    ("e", _target(api_version="2024-10-21?x=1"), "target.api_version"),
]


def test_the_api_starts_an_azure_run_and_refuses_a_bad_one_naming_the_field(carol, monkeypatch):
    suite = _suite()
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    api = client_for(carol)
    body = {"suite": str(suite.uuid), "graders": GRADERS, "trials_per_case": 1}

    answer = api.post(
        reverse("api:run-start"), {**body, "name": "a", "target": _target()}, format="json"
    )
    assert answer.status_code == 201, answer.content
    assert Run.objects.get(name="a").target == _target()

    for name, target, field in BAD:
        answer = api.post(
            reverse("api:run-start"), {**body, "name": name, "target": target}, format="json"
        )
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == field
    assert not Run.objects.filter(name__in=[name for name, _, _ in BAD]).exists()


def test_a_preset_keeps_the_deployment_and_its_errors_name_the_table():
    preset, action = target_preset_apply(name="azure", config=_target())
    assert action == "created" and preset.config["deployment"] == "gpt-4o-mini"
    for _, target, field in BAD:
        with pytest.raises(DomainError) as info:
            target_preset_apply(name="bad", config=target)
        assert info.value.field == field.replace("target.", "targets.bad.", 1)


def test_config_as_code_refuses_a_bad_deployment_naming_the_table(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(
        '[targets.azure]\nkind = "openai"\nprovider = "azure"\nbase_url = "http://127.0.0.1:9"\n'
        'deployment = "prod#1"\napi_version = "2024-10-21"\nmodel = "m"\n'
        'prompt_template = "$input"\n'
    )
    with pytest.raises(CommandError, match=r'^targets\.azure\.deployment: "prod#1" is not'):
        call_command("apply_config", str(path), stdout=StringIO())


def test_a_target_file_with_a_bad_api_version_is_refused_naming_the_field(tmp_path):
    _suite()
    target = tmp_path / "target.json"
    target.write_text(json.dumps(_target(api_version="latest")))
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))
    with pytest.raises(CommandError, match=r"^target\.api_version: expected an API version"):
        call_command("run_suite", "s", "--target", str(target), "--graders", str(graders))
    assert not Run.objects.exists()


def test_a_run_file_and_a_replay_keep_the_deployment_and_its_key_variable(monkeypatch):
    suite = _suite()
    run = Run.objects.create(suite=suite, name="r", target=_target(), status=Run.Status.SUCCEEDED)
    exported = run_export(run=run)["run"]["target"]
    assert (exported["provider"], exported["deployment"]) == ("azure", "gpt-4o-mini")
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    refusal = run_replay_refusal(run=run)
    assert "names the key variable AZURE_OPENAI_API_KEY, which is not set here" in refusal
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "x")
    assert run_replay_refusal(run=run) is None
