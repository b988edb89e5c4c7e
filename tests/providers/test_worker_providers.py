"""Each provider end to end through a real Celery worker process and the real broker, against
the shared mock (``tests.mockllm``): a target run gets exactly the passes the mock's policy
predicts, a judge rung on the same provider gives the mock's verdicts, the tool loop runs the
mock's scripted agent, and the mock's faults end as docs/providers/anthropic.md's error kinds
(Azure through the test's Azure front, tests/azure_front.py).

The worker pattern is ``tests/evals/test_worker.py``'s: its own queue, the test's database,
the filesystem broker on SQLite, Redis when ``REDIS_URL`` is set (the same tests run on
PostgreSQL + Redis under ``DATABASE_URL`` / ``REDIS_URL``). A provider is one entry of
``PROVIDERS``; the tool loop's are ``TOOL_LOOP_PROVIDERS``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from evals.models import Case, Grade, Run, Suite, Trial
from evals.runner.start import run_start
from judges.versions import judge_version_create
from tests.azure_front import AzureFront
from tests.evals.test_worker import (  # noqa: F401 - worker_queue is a fixture
    _run_wait,
    _worker_log,
    _worker_start,
    _worker_stop,
    worker_queue,
)
from tests.mockllm import mock_passes_predicted, mockllm  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

KEY = "test-e2e-key"
# Set on the worker only; Anthropic's endpoint of the mock checks it (401 otherwise), so a
# call answered there proves the worker read the variable the target names.
KEY_ENV = "ASSAY_E2E_TEST_API_KEY"
TOOLS = "tests.providers.shop_tools"
SAYS_ANSWER = {"key": "answer", "kind": "regex", "config": {"pattern": "^ANSWER-c[0-9]+$"}}


@dataclass(frozen=True)
class Provider:
    """What a target and a judge version add to speak ``name``; ``api``: the mock's
    ``by_api`` counter of its endpoint; ``mock_args``: the mock's options checking the key."""

    name: str
    api: str
    target: dict = field(default_factory=dict)
    judge_params: dict = field(default_factory=dict)
    mock_args: tuple[str, ...] = ()


AZURE_DEPLOYMENT = "e2e-deployment"
AZURE_JUDGE_DEPLOYMENT = "e2e-judge"  # serves mock-judge: Azure picks the model by deployment
PROVIDERS = {
    "openai": Provider(name="openai", api="openai", target={"api_key_env": KEY_ENV}),
    # Through the test's Azure front (tests/azure_front.py: the deployment's path, api-version
    # and the api-key header checked, the key the worker's), to the mock's OpenAI endpoint.
    "azure": Provider(
        name="azure",
        api="openai",
        target={
            "provider": "azure",
            "deployment": AZURE_DEPLOYMENT,
            "api_version": "2024-10-21",
            "api_key_env": KEY_ENV,
        },
        judge_params={
            "provider": "azure",
            "deployment": AZURE_JUDGE_DEPLOYMENT,
            "api_version": "2024-10-21",
            "api_key_env": KEY_ENV,
        },
    ),
    "anthropic": Provider(
        name="anthropic",
        api="anthropic",
        target={"provider": "anthropic", "api_key_env": KEY_ENV, "settings": {"max_tokens": 64}},
        judge_params={"provider": "anthropic", "api_key_env": KEY_ENV, "max_tokens": 256},
        mock_args=("--anthropic-api-key", KEY),
    ),
}
TOOL_LOOP_PROVIDERS = ["openai", "anthropic", "azure"]
_FRONTS: list[AzureFront] = []


@pytest.fixture(autouse=True)
def _fronts_stopped():
    """Every Azure front a test started is stopped after it."""
    yield
    while _FRONTS:
        _FRONTS.pop().stop()


def _base_url(provider: Provider, server) -> str:
    """The URL a target or judge of ``provider`` calls: the mock's, or an Azure front's."""
    if provider.name != "azure":
        return server.base_url
    front = AzureFront(
        server.base_url,
        deployments={AZURE_DEPLOYMENT: "mock-model", AZURE_JUDGE_DEPLOYMENT: "mock-judge"},
        api_key=KEY,
    )
    _FRONTS.append(front.start())
    return front.base_url


def _suite(n_cases: int, *, expected: bool = True) -> Suite:
    """``n_cases`` cases carrying the mock's marker, p spread over [0.2, 0.9]; ``expected``
    the marker's token, or none (a judge shown a reference answer would find it there)."""
    suite = Suite.objects.create(name=f"e2e-{uuid.uuid4().hex[:8]}")
    for i in range(n_cases):
        key = f"c{i:02d}"
        Case.objects.create(
            suite=suite,
            key=key,
            input=f"[case={key} p={0.2 + 0.7 * i / max(1, n_cases - 1):.3f} "
            f"expect=ANSWER-{key}] Question {i}?",
            expected=f"ANSWER-{key}" if expected else None,
        )
    return suite


def _predicted(suite: Suite, trials: int) -> int:
    return mock_passes_predicted(
        Case.objects.filter(suite=suite).values_list("input", flat=True), trials
    )


def _target(provider: Provider, server, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": _base_url(provider, server),
        "model": "mock-model",
        "prompt_template": "$input",
        "concurrency": 4,
        **provider.target,
        **extra,
    }


@pytest.fixture
def worker_factory(worker_queue, tmp_path):  # noqa: F811
    """As tests/evals/test_worker.py's, with ``tests.worker_app`` (the judge rung a chunk
    enqueues goes to the test's queue too) and the key in the worker's environment only."""
    started = []

    def start() -> None:
        log_path = tmp_path / f"worker-{len(started)}.log"
        env = {KEY_ENV: KEY, "ASSAY_TEST_QUEUE": worker_queue}
        started.append(
            _worker_start(
                worker_queue,
                log_path,
                pool="solo",
                concurrency=1,
                env=env,
                app_module="tests.worker_app",
            )
        )

    yield start
    for process, log in started:
        try:
            _worker_stop(process)
        finally:
            log.close()


def _passes(run: Run, grader: str) -> int:
    return Grade.objects.filter(trial__run=run, grader=grader, passed=True).count()


@pytest.mark.parametrize("provider", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_a_target_run_through_a_real_worker_gets_the_predicted_passes(
    provider,
    worker_factory,
    mockllm,  # noqa: F811
    tmp_path,
):
    server = mockllm("--latency-ms", "20", *provider.mock_args)
    worker_factory()
    suite = _suite(8)

    run = run_start(
        suite=suite,
        name="e2e-target",
        target=_target(provider, server),
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=3,
    )
    run = _run_wait(run, tmp_path)

    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    assert (run.trials_total, run.trials_finished, run.trials_errored) == (24, 24, 0)
    assert _passes(run, "exact") == _predicted(suite, 3)
    stats = server.stats()
    assert stats["by_api"][provider.api]["requests"] == 24  # every call once, on its protocol
    assert stats["requests"] == 24
    trial = Trial.objects.filter(run=run).first()
    assert trial.input_tokens > 0 and trial.output_tokens > 0
    assert trial.cost_usd is None  # mock-model has no price: unknown, never zero


@pytest.mark.parametrize("provider", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_a_judge_rung_through_a_real_worker_gives_the_mocks_verdicts(
    provider,
    worker_factory,
    mockllm,  # noqa: F811
    tmp_path,
):
    """The target and its judge on the same provider: the mock's judge (no flip) passes an
    output holding the case's token, so every verdict equals the regex grade of its trial,
    and their passes are the predicted ones; one call of each per trial."""
    server = mockllm("--latency-ms", "20", "--judge-flip", "0", *provider.mock_args)
    version, _ = judge_version_create(
        judge_name=f"e2e-{provider.name}",
        kind="rubric",
        model="mock-judge",
        base_url=_base_url(provider, server),
        prompt_template="",
        params={"max_attempts": 2, "concurrency": 4, **provider.judge_params},
        output_schema={},
    )
    worker_factory()
    suite = _suite(6, expected=False)
    judge = {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}}

    run = run_start(
        suite=suite,
        name="e2e-judged",
        target=_target(provider, server),
        graders=[SAYS_ANSWER, judge],
        trials_per_case=3,
    )
    run = _run_wait(run, tmp_path)

    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    verdicts = dict(
        Grade.objects.filter(trial__run=run, grader="judge").values_list("trial_id", "passed")
    )
    regex = dict(
        Grade.objects.filter(trial__run=run, grader="answer").values_list("trial_id", "passed")
    )
    assert len(verdicts) == len(regex) == 18
    assert verdicts == regex
    assert sum(verdicts.values()) == _predicted(suite, 3)
    assert 0 < sum(verdicts.values()) < 18  # both verdicts exercised
    stats = server.stats()
    assert stats["by_api"][provider.api]["requests"] == stats["requests"] == 36
    grade = Grade.objects.filter(trial__run=run, grader="judge").first()
    assert grade.details["model"] == "mock-judge" and grade.details["input_tokens"] > 0


@pytest.mark.parametrize(
    "provider", [PROVIDERS[name] for name in TOOL_LOOP_PROVIDERS], ids=TOOL_LOOP_PROVIDERS
)
def test_the_tool_loop_through_a_real_worker_runs_the_mocks_scripted_agent(
    provider,
    worker_factory,
    mockllm,  # noqa: F811
    tmp_path,
):
    """The mock's ``correct`` agent calls the declared tools in order with their schemas'
    examples, then answers: each trial is a trajectory of two tool calls run on its state,
    its final answer the predicted one (a trajectory takes the case's answer counter)."""
    server = mockllm("--latency-ms", "10", "--agent", "correct", *provider.mock_args)
    worker_factory()
    suite = _suite(4)
    target = _target(
        provider,
        server,
        tools=[f"{TOOLS}:find_order", f"{TOOLS}:refund_order"],
        environment=f"{TOOLS}:shop",
        max_steps=6,
    )

    run = run_start(
        suite=suite, name="e2e-agent", target=target, graders=[SAYS_ANSWER], trials_per_case=2
    )
    run = _run_wait(run, tmp_path)

    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    assert _passes(run, "answer") == _predicted(suite, 2)
    for trial in Trial.objects.filter(run=run):
        calls = [s["name"] for s in trial.trajectory if s["kind"] == "tool_call"]
        assert calls == ["find_order", "refund_order"], trial.trajectory
        assert trial.final_state == {
            "orders": {"A1": {"total": 30, "refunded": 30}},
            "log": ["find A1", "refund A1 30"],
        }
        assert trial.raw_response["model_calls"] == 3
    stats = server.stats()
    assert stats["agent"]["trajectories"] == 8 and stats["agent"]["tool_calls"] == 16
    assert stats["by_api"][provider.api]["requests"] == stats["requests"] == 24


@dataclass(frozen=True)
class Fault:
    """A fault of the mock (its options), the target settings it meets, and the trial's error
    message it must end as (its start: the documented kind first)."""

    name: str
    mock_args: tuple[str, ...]
    says: str
    target: dict = field(default_factory=dict)
    providers: tuple[str, ...] = tuple(PROVIDERS)
    calls_per_trial: int = 2  # attempts made: retried kinds twice (max_attempts 2)
    run_names_it: bool = False  # the run's message names the error (a refused setting)


FAULTS = [
    Fault(
        "429",
        ("--p429", "1", "--retry-after-s", "1"),
        "rate_limited after 2 attempts: mock rate limit",
    ),
    Fault(
        "529",
        ("--p529", "1"),
        "server_error 529 after 2 attempts: ",
        providers=("anthropic",),
    ),
    Fault("500", ("--p500", "1"), "server_error 500 after 2 attempts: "),
    Fault(
        "timeout",
        ("--ptimeout", "1", "--hang-s", "3"),
        "timeout after 2 attempts: no response within 0.5 s",
        target={"timeout_s": 0.5},
    ),
    Fault(
        "extra input",
        (),
        "rejected_parameter: model 'mock-model' refuses parameter 'seed': seed: Extra inputs "
        "are not permitted",
        target={"settings": {"max_tokens": 64, "seed": 3}, "concurrency": 1},
        providers=("anthropic",),
        calls_per_trial=0,  # one call in all: the rest is not sent
        run_names_it=True,
    ),
    Fault(
        "wrong key",
        ("--anthropic-api-key", "another-key"),
        "client_error 401: invalid x-api-key",
        providers=("anthropic",),
        calls_per_trial=1,
    ),
]


@pytest.mark.parametrize("provider", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_the_mocks_faults_end_as_the_documented_error_kinds(
    provider,
    worker_factory,
    mockllm,  # noqa: F811
    tmp_path,
):
    """One run per fault, on one worker: every trial errored with its kind and the provider's
    words, retried kinds retried once more (a 429 not before its ``Retry-After``), the others
    never; each run failed, saying how many trials errored (and, for a refused setting, which:
    the run says it once)."""
    faults = [f for f in FAULTS if provider.name in f.providers]
    runs = {}
    worker_factory()
    for fault in faults:
        key_checked = "--anthropic-api-key" in fault.mock_args  # the fault's own key
        args = fault.mock_args if key_checked else (*provider.mock_args, *fault.mock_args)
        server = mockllm("--latency-ms", "5", *args)
        settings = {"concurrency": 2, "max_attempts": 2, "backoff_base_s": 0.01}
        target = _target(provider, server, **{**settings, "backoff_max_s": 0.02, **fault.target})
        run = run_start(
            suite=_suite(2),
            name=f"fault {fault.name}",
            target=target,
            graders=[{"key": "exact", "kind": "exact"}],
            trials_per_case=1,
        )
        runs[fault.name] = (fault, server, run)

    for fault, server, run in runs.values():
        run = _run_wait(run, tmp_path)
        trials = list(Trial.objects.filter(run=run))
        assert run.status == Run.Status.FAILED, (fault.name, run.status, _worker_log(tmp_path))
        says = f"2 of 2 trials errored: {fault.says}" if fault.run_names_it else None
        assert run.error_message == (says or "2 of 2 trials errored"), fault.name
        assert [t.status for t in trials] == [Trial.Status.ERROR] * 2
        assert all(t.error_message.startswith(fault.says) for t in trials), [
            t.error_message for t in trials
        ]
        assert not Grade.objects.filter(trial__run=run).exists()  # an error, never a fail
        requests = server.stats()["by_api"][provider.api]["requests"]
        assert requests == (2 * fault.calls_per_trial or 1), (fault.name, requests)
        if fault.name == "429":
            assert all(t.latency_ms >= 1000 for t in trials)  # waited for Retry-After: 1


@pytest.mark.parametrize("provider", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_faults_retried_to_an_answer_leave_the_predicted_passes(
    provider,
    worker_factory,
    mockllm,  # noqa: F811
    tmp_path,
):
    """429s, 500s (and 529s on Anthropic) on a third of the requests: every trial answered in
    the end, the passes the predicted ones (a fault never advances the mock's answers)."""
    overloaded = ("--p529", "0.1") if provider.name == "anthropic" else ()
    server = mockllm(
        "--latency-ms", "5", "--p429", "0.15", "--retry-after-s", "0", "--p500", "0.1",
        *overloaded, *provider.mock_args,
    )  # fmt: skip
    worker_factory()
    suite = _suite(8)
    target = _target(provider, server, max_attempts=20, backoff_base_s=0.001, backoff_max_s=0.005)

    run = run_start(
        suite=suite,
        name="e2e-retried",
        target=target,
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=3,
    )
    run = _run_wait(run, tmp_path)

    assert run.status == Run.Status.SUCCEEDED, (run.error_message, _worker_log(tmp_path))
    assert _passes(run, "exact") == _predicted(suite, 3)
    status = server.stats()["by_api"][provider.api]["status"]
    assert int(status["429"]) > 0 and int(status["500"]) > 0, status
    if overloaded:
        assert int(status["529"]) > 0, status
    assert int(status["200"]) == 24
