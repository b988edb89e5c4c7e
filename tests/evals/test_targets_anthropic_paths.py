"""A target's ``provider`` on every path a target config takes: the API's start, config as
code (errors under the preset's table), the start form through a preset, run files, and a
replay (retries, top-ups) reading the key variable an ``anthropic`` target names."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Run, Suite, TargetPreset
from evals.presets import target_preset_apply
from evals.runner.replay import run_replay_refusal
from interop.run_file import run_export
from tests.core.test_api_core import client_for
from tests.evals.test_views_runs import start_form

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "exact", "kind": "exact"}]


def _target(**extra) -> dict:
    return {
        "kind": "openai",
        "provider": "anthropic",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "claude-test-1",
        "prompt_template": "$input",
        "settings": {"max_tokens": 64},
        **extra,
    }


def _suite() -> Suite:
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c", input="q", expected="a")
    return suite


def test_the_api_starts_an_anthropic_run_and_refuses_a_bad_one_naming_the_field(carol, monkeypatch):
    suite = _suite()
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    api = client_for(carol)
    body = {"suite": str(suite.uuid), "graders": GRADERS, "trials_per_case": 1}

    answer = api.post(
        reverse("api:run-start"), {**body, "name": "a", "target": _target()}, format="json"
    )
    assert answer.status_code == 201, answer.content
    assert Run.objects.get(name="a").target == _target()

    for name, target, field in [
        ("b", _target(settings={}), "target.settings.max_tokens"),
        ("c", _target(provider="bedrock"), "target.provider"),
        ("d", _target(tools=[{"name": "f", "function": "x:y"}]), "target.tools[0]"),  # a bad tool
    ]:
        answer = api.post(
            reverse("api:run-start"), {**body, "name": name, "target": target}, format="json"
        )
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == field
    assert not Run.objects.filter(name__in=["b", "c", "d"]).exists()


def test_a_preset_keeps_the_provider_and_its_errors_name_the_table():
    preset, action = target_preset_apply(name="claude", config=_target())
    assert action == "created" and preset.config["provider"] == "anthropic"
    with pytest.raises(DomainError) as info:
        target_preset_apply(name="bad", config=_target(settings={"temperature": 0}))
    assert info.value.field == "targets.bad.settings.max_tokens"
    with pytest.raises(DomainError) as info:
        target_preset_apply(name="bad", config=_target(provider="gemini"))
    assert info.value.field == "targets.bad.provider"
    assert "known: openai, anthropic" in info.value.message


def test_the_start_form_starts_an_anthropic_target_from_a_preset(client, carol, monkeypatch):
    suite = _suite()
    TargetPreset.objects.create(name="claude", config=_target())
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    client.force_login(carol)
    client.post(
        reverse("evals:run-new"),
        start_form(suite, name="from-preset", target_kind="preset", target_preset="claude"),
    )
    assert Run.objects.get(name="from-preset").target == _target()


def test_a_run_file_and_a_replay_keep_the_provider_and_its_key_variable(monkeypatch):
    suite = _suite()
    run = Run.objects.create(suite=suite, name="r", target=_target(), status=Run.Status.SUCCEEDED)
    assert run_export(run=run)["run"]["target"]["provider"] == "anthropic"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    refusal = run_replay_refusal(run=run)
    assert "names the key variable ANTHROPIC_API_KEY, which is not set here" in refusal
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    assert run_replay_refusal(run=run) is None
    keyless = Run.objects.create(
        suite=suite, name="k", target=_target(api_key_env=None), status=Run.Status.SUCCEEDED
    )
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert run_replay_refusal(run=keyless) is None
