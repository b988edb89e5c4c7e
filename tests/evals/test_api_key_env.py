"""A target names its key variable (``api_key_env``), or none for a keyless endpoint, on every
path that declares one (the start form, the API, the command's file, config as code, judge
versions) and every path that calls it again (retries, top-ups)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Run, Suite, TargetPreset, Trial
from evals.runner.replay import run_replay_refusal
from evals.runner.start import run_start
from evals.runner.targets.openai import OpenAIConfig
from judges.client import client_config_parse
from judges.models import JudgeVersion
from judges.versions import judge_version_create
from tests.core.test_api_core import client_for
from tests.mockllm import mockllm  # noqa: F401 - the fixture

GRADERS = [{"key": "exact", "kind": "exact"}]
SECRET = "sk-proj-abcdefghijklmnop1234"
N = 5


def _target(base_url: str = "http://127.0.0.1:9/v1", **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": base_url,
        "model": "mock-model",
        "prompt_template": "$input",
        **extra,
    }


def _suite() -> Suite:
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c", input="q", expected="a")
    return suite


def _succeeded(target: dict) -> Run:
    suite, _ = Suite.objects.get_or_create(name="s")
    return Run.objects.create(
        suite=suite, name=f"r{Run.objects.count()}", target=target, status=Run.Status.SUCCEEDED
    )


@pytest.mark.parametrize("keyless", [None, False])  # false: TOML has no null
def test_a_keyless_target_names_no_variable(keyless):
    assert OpenAIConfig.parse(_target(api_key_env=keyless)).api_key_env is None
    assert OpenAIConfig.parse(_target()).api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    "value", [SECRET, "sk-ant-api03-x", "gsk_abc", "AbCdEfGh12345678IjKlMnOp90"]
)
def test_it_refuses_a_key_given_as_the_variable_name_without_repeating_it(value):
    with pytest.raises(DomainError, match=r"^target\.api_key_env: looks like a key") as info:
        OpenAIConfig.parse(_target(api_key_env=value))
    assert value not in str(info.value)
    with pytest.raises(DomainError, match=r"^params\.api_key_env: looks like a key"):
        client_config_parse(
            base_url="http://127.0.0.1:9/v1", model="m", params={"api_key_env": value}
        )


@pytest.mark.django_db
def test_a_judge_version_may_be_keyless():
    version, _ = judge_version_create(
        judge_name="j",
        kind="rubric",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        prompt_template="",
        params={"api_key_env": None},
        output_schema={},
    )
    assert version.params == {"api_key_env": None}
    assert (
        client_config_parse(
            base_url="http://127.0.0.1:9/v1", model="m", params=version.params
        ).api_key_env
        is None
    )


@pytest.mark.django_db
def test_a_replay_reads_the_snapshots_variable_and_names_it_when_missing(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    named = _succeeded(_target(api_key_env="MISTRAL_API_KEY"))
    refusal = run_replay_refusal(run=named)
    assert "names the key variable MISTRAL_API_KEY, which is not set here" in refusal
    assert '"api_key_env": null' in refusal
    assert "MISTRAL_API_KEY" in run_replay_refusal(
        run=_succeeded(_target(api_key_env="MISTRAL_API_KEY"))
    )
    assert "OPENAI_API_KEY" in run_replay_refusal(run=_succeeded(_target()))
    monkeypatch.setenv("MISTRAL_API_KEY", "x")
    assert run_replay_refusal(run=named) is None
    assert run_replay_refusal(run=_succeeded(_target(api_key_env=None))) is None
    assert run_replay_refusal(run=_succeeded(_target(api_key_env=False))) is None


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_run_against_a_keyless_endpoint_can_be_settled_with_more_trials(
    mockllm,  # noqa: F811
    monkeypatch,
    capsys,
):
    """The mock takes no key; c00 drops from p=1.0 to p=0.3 (its tag): a suspect at the first
    look, settled by a top-up that calls the same keyless endpoint again."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = mockllm("--latency-ms", "1")
    suite = Suite.objects.create(name="s", kind=Suite.Kind.REGRESSION)
    for i in range(4):
        key = f"c{i:02d}"
        Case.objects.create(
            suite=suite, key=key, input="q", expected=f"A-{key}", tags=["1.0" if i else "0.3"]
        )
    runs = []
    for name, p in (("base", "1.0"), ("head", "$tags")):
        template = f"[case=$key-{name} p={p} expect=A-$key] $input"
        target = _target(
            server.base_url, api_key_env=None, prompt_template=template, max_attempts=1
        )
        run = run_start(suite=suite, name=name, target=target, graders=GRADERS, trials_per_case=N)
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED
        runs.append(run)
    before = server.stats()["requests"]
    with pytest.raises(SystemExit) as exit_info:
        call_command("gate", "--base", str(runs[0].uuid), "--head", str(runs[1].uuid), "--top-up")
    out = capsys.readouterr().out
    assert exit_info.value.code in (0, 1), out
    assert "is not set here" not in out
    assert Trial.objects.filter(run=runs[1], case__key="c00", attempt__gt=N).exists()
    assert server.stats()["requests"] > before


@pytest.mark.django_db
def test_the_start_form_names_the_key_variable_or_none(client, carol, monkeypatch):
    suite = _suite()
    client.force_login(carol)
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    form = {
        "suite": str(suite.uuid),
        "target_kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": "$input",
        "settings_json": "{}",
        "trials_per_case": 1,
        "graders": json.dumps(GRADERS),
    }
    page = client.get(reverse("evals:run-new")).content.decode()
    assert 'name="api_key_env"' in page and 'name="no_api_key"' in page
    page = client.post(reverse("evals:run-new"), {**form, "name": "a", "api_key_env": SECRET})
    assert "looks like a key itself" in page.content.decode()
    assert SECRET not in page.content.decode() and not Run.objects.exists()
    client.post(reverse("evals:run-new"), {**form, "name": "keyless", "no_api_key": "on"})
    client.post(
        reverse("evals:run-new"), {**form, "name": "named", "api_key_env": "MISTRAL_API_KEY"}
    )
    client.post(reverse("evals:run-new"), {**form, "name": "default"})
    targets = {r.name: r.target for r in Run.objects.all()}
    assert targets["keyless"]["api_key_env"] is None
    assert targets["named"]["api_key_env"] == "MISTRAL_API_KEY"
    assert "api_key_env" not in targets["default"]  # OPENAI_API_KEY, as before


@pytest.mark.django_db
def test_the_api_takes_a_key_variable_or_null_and_refuses_a_key(carol, monkeypatch):
    suite = _suite()
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    api = client_for(carol)
    body = {"suite": str(suite.uuid), "graders": GRADERS, "trials_per_case": 1}
    answer = api.post(
        reverse("api:run-start"),
        {**body, "name": "k", "target": _target(api_key_env=SECRET)},
        format="json",
    )
    assert answer.status_code == 400 and SECRET not in answer.content.decode()
    assert "target.api_key_env" in answer.content.decode()
    answer = api.post(
        reverse("api:run-start"),
        {**body, "name": "n", "target": _target(api_key_env=None)},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    assert Run.objects.get(name="n").target["api_key_env"] is None
    schema = api.get("/api/schema/").content.decode()
    assert "api_key_env" in schema


@pytest.mark.django_db
def test_config_as_code_declares_a_keyless_target_with_false(tmp_path):
    path = tmp_path / "assay.toml"
    path.write_text(
        '[targets.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        'prompt_template = "$input"\napi_key_env = false\n'
    )
    call_command("apply_config", str(path))
    config = TargetPreset.objects.get(name="local").config
    assert OpenAIConfig.parse(config).api_key_env is None
    assert run_replay_refusal(run=_succeeded(config)) is None


def test_config_as_code_declares_a_keyless_judge_with_false(db, tmp_path):
    # TOML has no null: the documented false was refused on [judges.params] while accepted
    # on [targets.X].
    path = tmp_path / "assay.toml"
    path.write_text(
        '[[judges]]\nname = "local-judge"\nkind = "rubric"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\n[judges.params]\ncriteria = "c"\n'
        "api_key_env = false\n"
    )
    call_command("apply_config", str(path))
    version = JudgeVersion.objects.get(judge__name="local-judge")
    assert version.params["api_key_env"] is False
    config = client_config_parse(
        base_url=version.base_url, model=version.model, params=version.params
    )
    assert config.api_key_env is None  # no key sent


KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changes",
    [
        {"api_key_env": KEY},
        {"api_key_env": KEY, "no_api_key": "on", "model": ""},  # ticked: not read, nor shown
        {"api_key_env": KEY, "no_api_key": "on", "provider": "azure", "deployment": "a/b"},
        {"settings_json": json.dumps({"temperature": 0, "api_key": KEY}), "model": ""},
        {"settings_json": '{"api_key": "' + KEY + '",}'},  # not JSON
        {"provider": "azure", "deployment": "d", "api_version": KEY},  # a key in another field
    ],
)
def test_a_refused_start_form_never_shows_a_key_back(client, carol, changes):
    suite = _suite()
    client.force_login(carol)
    form = {
        "suite": str(suite.uuid),
        "name": "r",
        "target_kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": "$input",
        "settings_json": "{}",
        "trials_per_case": 1,
        "graders": json.dumps(GRADERS),
    }
    response = client.post(reverse("evals:run-new"), {**form, **changes})
    page = response.content.decode()
    assert response.status_code == 200 and 'class="errorlist' in page
    assert KEY not in page and "abcdefghijklmnopqrstuvwxyz" not in page
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_apis_refusals_never_repeat_a_key(carol, monkeypatch):
    suite = _suite()
    monkeypatch.setattr("evals.runner.start.transaction.on_commit", lambda fn, **kw: None)
    api = client_for(carol)
    body = {"suite": str(suite.uuid), "graders": GRADERS, "trials_per_case": 1, "name": "k"}
    targets = [
        _target(api_key_env=KEY),
        _target(api_key_env=KEY, provider="azure", deployment="a/b", api_version="2024-10-21"),
        _target(api_key_env=KEY, settings={"temperature": "hot"}),
        # a key pasted into another field: refused without repeating it
        _target(provider=KEY),
        _target(provider="azure", deployment=f"{KEY}/x", api_version="2024-10-21"),
        _target(provider="azure", deployment="d", api_version=KEY),
        _target(provider="anthropic", anthropic_version=f"{KEY}!"),
        _target(provider="anthropic", settings={"max_tokens": KEY}),
    ]
    for target in targets:
        answer = api.post(reverse("api:run-start"), {**body, "target": target}, format="json")
        assert answer.status_code == 400 and KEY not in answer.content.decode(), answer.content
    assert not Run.objects.exists()  # judge versions have no API to create one
