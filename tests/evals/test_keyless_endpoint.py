"""A keyless OpenAI-compatible endpoint (a local vLLM, Ollama or llama.cpp server:
``"api_key_env": null``, ``false`` in TOML) called on every path that starts or replays a run,
with ``OPENAI_API_KEY`` set on the worker: every call answered and none carrying a key, from the
start form, the API, config as code (a preset run by ``run_suite``), a target file given to
``run_suite``, and the retry of a run's errored trials; its run file keeps the null. (The
top-up: ``test_api_key_env.test_a_run_against_a_keyless_endpoint_can_be_settled_with_more_trials``.)
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from evals.models import Case, Run, Suite, Trial
from evals.runner.replay import run_replay_refusal
from evals.runner.retry import run_retry
from evals.runner.start import run_start
from evals.runner.targets.openai import OpenAIConfig
from interop.run_file import run_export
from tests.core.test_api_core import client_for
from tests.fakellm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# transaction=True: on_commit fires for real, so the eager chunk tasks execute as in production.

GRADERS = [{"key": "exact", "kind": "exact"}]
WORKER_KEY = "sk-worker-key-that-must-not-leave-0123"


@pytest.fixture
def local(monkeypatch):
    """A local server that takes no key; the worker has ``OPENAI_API_KEY`` set all the same."""
    monkeypatch.setenv("OPENAI_API_KEY", WORKER_KEY)
    with FakeLLM() as server:
        yield server


def _suite(*inputs: str) -> Suite:
    suite = Suite.objects.create(name="local")
    for i, text in enumerate(inputs or ("[answer=A] q",)):
        Case.objects.create(suite=suite, key=f"c{i}", input=text, expected="A")
    return suite


def _target(server: FakeLLM, **extra) -> dict:
    return server.target(api_key_env=None, model="llama3.1:8b", **extra)


def _no_key_sent(server: FakeLLM, calls: int) -> None:
    assert server.requests == calls
    assert all("authorization" not in h and "api-key" not in h for h in server.headers)
    assert WORKER_KEY not in json.dumps(server.headers)


def _succeeded_with_a_pass(name: str) -> Run:
    run = Run.objects.get(name=name)
    assert (run.status, run.trials_errored) == (Run.Status.SUCCEEDED, 0), run.error_message
    assert Trial.objects.filter(run=run, grades__passed=True).count() == 1
    return run


def test_the_start_form_runs_a_keyless_target(client, carol, local):
    suite = _suite()
    client.force_login(carol)
    answer = client.post(
        reverse("evals:run-new"),
        {
            "suite": str(suite.uuid),
            "name": "form",
            "target_kind": "openai",
            "provider": "openai",
            "base_url": local.base_url,
            "model": "llama3.1:8b",
            "no_api_key": "on",
            "prompt_template": "$input",
            "settings_json": "{}",
            "trials_per_case": 1,
            "graders": json.dumps(GRADERS),
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    run = _succeeded_with_a_pass("form")
    assert run.target["api_key_env"] is None
    _no_key_sent(local, 1)


def test_the_api_runs_a_keyless_target(carol, local):
    suite = _suite()
    answer = client_for(carol).post(
        reverse("api:run-start"),
        {
            "suite": str(suite.uuid),
            "name": "api",
            "target": _target(local),
            "graders": GRADERS,
            "trials_per_case": 1,
        },
        format="json",
    )
    assert answer.status_code == 201, answer.content
    _succeeded_with_a_pass("api")
    _no_key_sent(local, 1)


def test_config_as_code_and_a_target_file_run_a_keyless_target(local, tmp_path):
    _suite()
    path = tmp_path / "assay.toml"
    path.write_text(
        f'[targets.ollama]\nkind = "openai"\nbase_url = "{local.base_url}"\n'
        'model = "llama3.1:8b"\nprompt_template = "$input"\napi_key_env = false\n'
    )
    call_command("apply_config", str(path), stdout=StringIO())
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))
    target = tmp_path / "target.json"
    target.write_text(json.dumps(_target(local)))
    for name, source in (
        ("preset", ["--target-preset", "ollama"]),
        ("file", ["--target", str(target)]),
    ):
        call_command(
            "run_suite",
            "local",
            *source,
            "--graders",
            str(graders),
            "--name",
            name,
            "--trials",
            "1",
            "--wait",
            stdout=StringIO(),
        )
        run = _succeeded_with_a_pass(name)
        # kept keyless, not the default variable (a preset keeps TOML's false, read as null)
        assert OpenAIConfig.parse(run.target).api_key_env is None
    _no_key_sent(local, 2)
    assert local.requests == 2 and len(local.headers) == 2
    assert all("authorization" not in headers for headers in local.headers)


def test_a_keyless_runs_errored_trials_are_retried_and_its_run_file_keeps_the_null(local):
    """The first call of the prompt answers 500 (one attempt): the run fails; its retry calls the
    same keyless endpoint again and passes."""
    suite = _suite("[answer=A] [fault=500x1] q")
    run = run_start(
        suite=suite, name="retry", target=_target(local), graders=GRADERS, trials_per_case=1
    )
    run.refresh_from_db()
    assert run.trials_errored == 1
    run_retry(run=run)
    _succeeded_with_a_pass("retry")
    _no_key_sent(local, 2)
    run.refresh_from_db()
    assert run_export(run=run)["run"]["target"]["api_key_env"] is None
    assert run_replay_refusal(run=run) is None
