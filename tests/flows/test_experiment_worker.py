"""An experiment end to end: declared in a config file, started by ``manage.py run_experiment``,
run by a real Celery worker against the shared mock (``tests.mockllm``), decided, and settled by
one racing round (docs/experiments.md).

Each variant's prompt template writes the mock's marker with its own pass probability and a
case name of its own (``c03-strong``), so each variant draws from its own answer sequence:
its passes per case are what the mock's policy predicts (``expected_outcome``), whatever the
order of calls, and the best set must be what ``stats.best_set`` says of those predicted
counts. The worker pattern is tests/evals/test_worker.py's: the filesystem broker on SQLite,
Redis under ``REDIS_URL`` (the same tests on PostgreSQL + Redis with ``DATABASE_URL``)."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from evals.models import Experiment, Trial
from stats.best_set import best_set
from stats.racing import race_look, racing_plan
from tests.evals.test_worker import (  # noqa: F401 - worker_queue and worker_factory are fixtures
    _worker_log,
    worker_factory,
    worker_queue,
)
from tests.mockllm import MOCK_SEED, mock_module, mockllm  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

CASES, TRIALS = 10, 4


def _config(base_url: str, rates: dict[str, float]) -> str:
    cases = ",\n".join(
        f'  {{ key = "c{i:02d}", input = "Question {i}?", expected = "ANSWER-c{i:02d}" }}'
        for i in range(CASES)
    )
    variants = "".join(
        f"""
[[experiments.e2e.variants]]
label = "{label}"
[experiments.e2e.variants.target]
kind = "openai"
base_url = "{base_url}"
model = "mock-model"
api_key_env = false
concurrency = 4
prompt_template = "[case=${{key}}-{label} p={p} expect=ANSWER-$key] $input"
"""
        for label, p in rates.items()
    )
    return f"""
[suites.e2e]
cases = [
{cases},
]

[experiments.e2e]
suite = "e2e"
graders = [{{ key = "exact", kind = "exact" }}]
trials_per_case = {TRIALS}
alpha = 0.05
{variants}"""


def _predicted(rates: dict[str, float], trials: int = TRIALS) -> np.ndarray:
    """(V, C) passes the mock gives each variant's first ``trials`` calls of each case."""
    server = mock_module()
    return np.array(
        [
            [
                sum(
                    server.expected_outcome(MOCK_SEED, f"c{c:02d}-{label}", n, p)
                    for n in range(trials)
                )
                for c in range(CASES)
            ]
            for label, p in rates.items()
        ]
    )


def _run_experiment(tmp_path, rates: dict[str, float], server, *args: str) -> tuple[int, dict]:
    path = tmp_path / "experiment.toml"
    path.write_text(_config(server.base_url, rates), encoding="utf-8")
    out = StringIO()
    try:
        call_command(
            "run_experiment", str(path), "e2e", "--json", "--timeout", "120", *args, stdout=out
        )
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code)
    return code, json.loads(out.getvalue())


def _trials(data: dict) -> dict[str, int]:
    return {v["label"]: Trial.objects.filter(run__uuid=v["run"]).count() for v in data["variants"]}


def test_four_variants_through_a_worker_decide_the_best_the_mock_implies(
    worker_factory,  # noqa: F811
    worker_queue,  # noqa: F811
    mockllm,  # noqa: F811
    tmp_path,
):
    rates = {"strong": 0.97, "middling": 0.5, "weak": 0.25, "wrong": 0.02}
    passed = _predicted(rates)
    graded = np.full_like(passed, TRIALS)
    expected = best_set(passed, graded, alpha=0.05, names=list(rates))
    assert expected.decided  # the scenario: one variant clearly best
    server = mockllm("--latency-ms", "10")
    # tests.worker_app: what the worker enqueues (the racing's advance) goes to this queue too.
    worker_factory(env={"ASSAY_TEST_QUEUE": worker_queue}, app_module="tests.worker_app")

    code, data = _run_experiment(tmp_path, rates, server)

    assert code == 0, (data, _worker_log(tmp_path))
    assert [v["status"] for v in data["variants"]] == ["succeeded"] * 4
    decision = data["decision"]
    assert decision["decided"] is True
    assert decision["best"] == [list(rates)[i] for i in expected.in_set_indices()] == ["strong"]
    by_label = {v["label"]: v for v in decision["variants"]}
    for i, label in enumerate(rates):
        assert by_label[label]["passed"] == int(passed[i].sum())  # the mock's policy, exactly
        assert by_label[label]["graded"] == CASES * TRIALS
    assert server.stats()["requests"] == 4 * CASES * TRIALS
    assert Experiment.objects.get().racing == {}


def test_one_racing_round_adds_trials_only_to_the_variants_left_in(
    worker_factory,  # noqa: F811
    worker_queue,  # noqa: F811
    mockllm,  # noqa: F811
    tmp_path,
):
    rates = {"first": 0.9, "second": 0.8, "third": 0.2, "fourth": 0.05}
    passed = _predicted(rates)
    graded = np.full_like(passed, TRIALS)
    look = race_look(
        racing_plan(alpha=0.05, rounds=1, trials_per_round=2),
        0,
        passed,
        graded,
        names=list(rates),
    )
    assert look.active == (0, 1) and look.cases  # the scenario: two left in, cases to sample
    server = mockllm("--latency-ms", "10")
    # tests.worker_app: what the worker enqueues (the racing's advance) goes to this queue too.
    worker_factory(env={"ASSAY_TEST_QUEUE": worker_queue}, app_module="tests.worker_app")

    code, data = _run_experiment(
        tmp_path, rates, server, "--settle", "1", "--trials-per-round", "2"
    )

    racing = data["racing"]
    assert racing["status"] == "done", (data, _worker_log(tmp_path))
    first = racing["looks"][0]
    assert first["active"] == [0, 1] and first["cases"] == len(look.cases)
    added = 2 * len(look.cases)
    assert _trials(data) == {
        "first": CASES * TRIALS + added,
        "second": CASES * TRIALS + added,
        "third": CASES * TRIALS,
        "fourth": CASES * TRIALS,
    }
    assert [v["status"] for v in data["variants"]] == ["succeeded"] * 4
    decision = data["decision"]
    assert set(decision["best"]) <= {"first", "second"}
    assert code == (0 if decision["decided"] else 1)
    assert server.stats()["requests"] == 4 * CASES * TRIALS + 2 * added
