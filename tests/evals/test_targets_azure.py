"""A model target with ``"provider": "azure"`` run end to end through ``run_suite`` (eager
Celery) against the shared mock behind the test-side Azure front (``tests.azure_front``): the
predicted passes, the URL, query and ``api-key`` header Azure checks, 429s retried, and Azure's
errors (a wrong key, an unknown deployment, an unsupported API version) as documented kinds with
the key never shown."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command

from evals.models import Case, Run, Suite, Trial
from providers.models import ModelPrice
from tests.azure_front import NO_DEPLOYMENT, UNAUTHORIZED, AzureFront
from tests.evals.test_targets_anthropic import _mock_policy
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
# transaction=True: on_commit fires for real, so the eager chunk tasks execute as in production.

GRADERS = [{"key": "exact", "kind": "exact"}]
SEED = 1234  # the mock's default
TRIALS = 4
KEY = "azure-test-key-0123456789abcdef"
KEY_ENV = "ASSAY_AZURE_TEST_API_KEY"
DEPLOYMENT = "chat-prod"
DEPLOYED_MODEL = "gpt-4o-mini-2024-07-18"  # what the deployment serves, named in its replies


def suite_with(name: str, ps: list[float]) -> Suite:
    """A suite of cases carrying the mock's marker, case ``cNN`` passing with ``ps[NN]``."""
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


def predicted(suite: Suite, trials: int) -> int:
    """Passes the mock's policy predicts for ``trials`` answers of each of the suite's cases."""
    expected_outcome = _mock_policy()
    total = 0
    for case in Case.objects.filter(suite=suite):
        key, p = re.search(r"\[case=(\S+) p=([0-9.]+)", case.input).groups()
        total += sum(expected_outcome(SEED, key, n, float(p)) for n in range(trials))
    return total


def run_suite(*args: str) -> tuple[int, dict]:
    out = StringIO()
    try:
        call_command("run_suite", *args, "--wait", "--json", stdout=out)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, json.loads(out.getvalue())


def passes(run: Run) -> int:
    return Trial.objects.filter(run=run, grades__grader="exact", grades__passed=True).count()


def azure_target(base_url: str, **extra) -> dict:
    return {
        "kind": "openai",
        "provider": "azure",
        "base_url": base_url,
        "deployment": DEPLOYMENT,
        "api_version": "2024-10-21",
        "model": "my-chat-model",  # no price: the trial is priced by the reply's model
        "api_key_env": KEY_ENV,
        "prompt_template": "$input",
        "system_prompt": "Answer with the token only.",
        "settings": {"temperature": 0},
        **extra,
    }


@pytest.fixture
def front(mockllm):  # noqa: F811
    """The shared mock (1 ms latency) behind an Azure front serving ``DEPLOYMENT``."""
    server = mockllm("--latency-ms", "1")
    with AzureFront(server.base_url, deployments={DEPLOYMENT: DEPLOYED_MODEL}, api_key=KEY) as f:
        f.mock = server
        yield f


def _start(front: AzureFront, tmp_path, suite: str, trials: int = TRIALS, **extra) -> Run:
    target = tmp_path / "target.json"
    target.write_text(json.dumps(azure_target(front.base_url, **extra)))
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))
    code, summary = run_suite(
        suite, "--target", str(target), "--graders", str(graders), "--trials", str(trials)
    )
    run = Run.objects.get(uuid=summary["run"])
    run.exit_code = code
    return run


def test_a_run_gets_the_predicted_passes_through_azures_url_query_and_key(
    front, monkeypatch, tmp_path
):
    monkeypatch.setenv(KEY_ENV, KEY)
    suite = suite_with("azure", [1.0, 0.7, 0.5, 0.2, 0.0, 0.9])
    # The mock reports no cached tokens; the built-in gpt-4o-mini price has a cached-input
    # class, so its cost would be unknown (docs/costs.md). A price of input and output only:
    ModelPrice.objects.create(
        model="gpt-4o-mini*", input_usd_per_mtok="0.15", output_usd_per_mtok="0.60"
    )

    run = _start(front, tmp_path, "azure")

    assert (run.exit_code, run.status, run.trials_errored) == (0, Run.Status.SUCCEEDED, 0)
    assert passes(run) == predicted(suite, TRIALS)
    assert len(front.requests) == 6 * TRIALS
    sent = front.requests[0]
    assert sent["path"] == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert sent["query"] == {"api-version": "2024-10-21"}
    assert sent["headers"]["api-key"] == KEY
    assert "authorization" not in sent["headers"]
    assert sent["body"]["model"] == "my-chat-model"  # sent as configured; Azure ignores it
    assert sent["body"]["messages"][0] == {
        "role": "system",
        "content": "Answer with the token only.",
    }
    assert sent["body"]["temperature"] == 0
    trial = Trial.objects.filter(run=run).first()
    assert trial.raw_response["model"] == DEPLOYED_MODEL  # the reply names the deployment's
    assert trial.input_tokens > 0 and trial.output_tokens > 0
    assert trial.cost_usd is not None  # priced by the reply's model, through gpt-4o-mini*
    assert run.target["provider"] == "azure" and run.target["deployment"] == DEPLOYMENT


def test_429s_are_retried_and_the_passes_are_still_the_predicted(mockllm, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv(KEY_ENV, KEY)
    server = mockllm("--latency-ms", "1", "--p429", "0.3", "--retry-after-s", "0")
    suite = suite_with("azure", [1.0, 0.6, 0.3, 0.8])
    with AzureFront(server.base_url, deployments={DEPLOYMENT: DEPLOYED_MODEL}, api_key=KEY) as f:
        run = _start(
            f, tmp_path, "azure", max_attempts=20, backoff_base_s=0.001, backoff_max_s=0.01
        )
    assert (run.exit_code, run.trials_errored) == (0, 0)
    assert passes(run) == predicted(suite, TRIALS)
    assert len(f.requests) > 4 * TRIALS  # the 429s were retried


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"key": "another-key"}, f"client_error 401: {UNAUTHORIZED}"),
        ({"deployment": "chat-staging"}, f"client_error 404: {NO_DEPLOYMENT}"),
        ({"api_version": "2023-01-01"}, "client_error 404: Resource not found"),
    ],
)
def test_azures_refusals_fail_the_run_in_its_words_never_showing_the_key(
    front, monkeypatch, tmp_path, change, error
):
    monkeypatch.setenv(KEY_ENV, change.pop("key", KEY))
    suite_with("azure", [1.0, 0.5])

    run = _start(front, tmp_path, "azure", trials=1, **change)

    assert (run.exit_code, run.status) == (1, Run.Status.FAILED)
    trials = Trial.objects.filter(run=run)
    assert {t.error_message for t in trials} == {error}
    assert {t.status for t in trials} == {"error"}
    stored = json.dumps([[t.raw_response, t.error_message] for t in trials] + [run.target])
    assert KEY not in stored and "another-key" not in stored
