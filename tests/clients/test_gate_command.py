"""``assay-gate`` (the installed console script) against a live server: the exit codes of
``manage.py gate`` (docs/ci.md) on runs recorded by the pytest plugin (end to end) and
posted with the client; heads and bases as run ids, ``suite/run`` names and run files."""

from __future__ import annotations

import json
import uuid

import pytest
from assay_client import AssayClient

from evals.baselines import baseline_set
from evals.models import Run, TopUp
from tests.clients.processes import assay_gate, client_env, run_pytest
from tests.evals.test_top_up import executed, make_suite, sim

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

# Eight cases; FAIL (an environment variable) names the cases that fail on every attempt.
EVALS = """
import os
import pytest

FAIL = set(os.environ.get("FAIL", "").split(","))


@pytest.mark.parametrize("case", [f"c{i}" for i in range(8)])
def test_policy(case, record_property):
    record_property("output", "refused" if case in FAIL else "approved")
    assert case not in FAIL
"""


def _record(folder, env, run: str, fail: str = "") -> None:
    """A pytest session of 8 cases x 5 attempts recorded as run ``run`` of suite policy."""
    session = run_pytest(
        folder,
        "--assay-suite=policy",
        f"--assay-run={run}",
        "--assay-repeat=5",
        env={**env, "FAIL": fail},
    )
    assert "40 trials of 8 cases" in session.stdout, session.stdout + session.stderr


def test_it_exits_1_on_a_seeded_regression_and_0_on_an_a_a_pair(server_url, token, tmp_path):
    (tmp_path / "test_evals.py").write_text(EVALS, encoding="utf-8")
    env = client_env(server_url, token)
    _record(tmp_path, env, "base")
    _record(tmp_path, env, "again")
    _record(tmp_path, env, "head", fail="c1,c4,c6")
    regression = assay_gate("--head", "policy/head", "--base", "policy/base", env=env)
    assert regression.returncode == 1, regression.stdout + regression.stderr
    assert regression.stdout.startswith("Blocked:")
    assert "exit 1 (regression)" in regression.stdout
    same = assay_gate("--head", "policy/again", "--base", "policy/base", env=env)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "exit 0" in same.stdout


def _trials(fail: set[str]) -> list[dict]:
    return [
        {"case_id": f"c{i}", "input": f"q{i}", "attempt": a, "passed": f"c{i}" not in fail}
        for i in range(8)
        for a in range(1, 6)
    ]


@pytest.fixture
def recorded(server_url, token) -> dict[str, str]:
    """Three runs of suite policy posted with the client: base, an A/A repeat of it, and a
    head where three cases fail every attempt (a seeded regression)."""
    env = client_env(server_url, token)
    with AssayClient(server_url, token=token) as client:
        for run, fail in (("base", set()), ("again", set()), ("head", {"c1", "c4", "c6"})):
            client.ingest({"suite": "policy", "run": run}, _trials(fail))
    return env


def test_it_takes_run_ids_the_suite_baseline_and_a_run_file(recorded, tmp_path, carol):
    runs = {r.name: str(r.uuid) for r in Run.objects.filter(suite__name="policy")}
    as_json = assay_gate("--head", runs["head"], "--base", runs["base"], "--json", env=recorded)
    assert as_json.returncode == 1
    answer = json.loads(as_json.stdout)
    assert answer["decision"]["exit_code"] == 1
    assert answer["comparison"]["head"]["uuid"] == runs["head"]
    # Without --base: the suite's current baseline.
    base = Run.objects.get(name="base")
    baseline_set(suite=base.suite, run=base, by=carol)
    assert assay_gate("--head", runs["again"], env=recorded).returncode == 0
    assert assay_gate("--head", runs["head"], env=recorded).returncode == 1
    # A committed baseline file (export_run's document) as the base.
    with AssayClient(recorded["ASSAY_URL"], token=recorded["ASSAY_TOKEN"]) as client:
        exported = client._http.get(f"/api/runs/{runs['base']}/export", params={"format": "json"})
    assert exported.status_code == 200
    baseline_file = tmp_path / "baseline.json"
    baseline_file.write_bytes(exported.content)
    from_file = assay_gate("--head", runs["head"], "--base", str(baseline_file), env=recorded)
    assert from_file.returncode == 1, from_file.stdout + from_file.stderr
    assert (
        assay_gate("--head", runs["again"], "--base", str(baseline_file), env=recorded).returncode
        == 0
    )


def test_bad_arguments_exit_3_and_never_0_or_1(recorded, tmp_path):
    unknown = assay_gate("--head", str(uuid.uuid4()), "--base", "policy/base", env=recorded)
    assert unknown.returncode == 3 and "HTTP 404" in unknown.stderr
    no_run = assay_gate("--head", "policy/nope", env=recorded)
    assert no_run.returncode == 3 and "suite 'policy' has no run named 'nope'" in no_run.stderr
    assert assay_gate("--head", "not a run", env=recorded).returncode == 3
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    unreadable = assay_gate("--head", "policy/head", "--base", str(broken), env=recorded)
    assert unreadable.returncode == 3 and "cannot read the run file" in unreadable.stderr
    alpha = assay_gate(
        "--head", "policy/head", "--base", "policy/base", "--alpha", "0.9", env=recorded
    )
    assert alpha.returncode == 3 and "field alpha" in alpha.stderr
    assert assay_gate("--base", "policy/base", env=recorded).returncode == 3  # no --head
    no_token = {**recorded, "ASSAY_TOKEN": "wrong"}
    assert assay_gate("--head", "policy/head", env=no_token).returncode == 3  # 401


def test_an_unreachable_server_cannot_decide(token):
    # A port nothing listens on: no decision, so 2 (rerun), never 0 or 1.
    env = client_env("http://127.0.0.1:9", token)
    unreachable = assay_gate("--head", str(uuid.uuid4()), env=env)
    assert unreachable.returncode == 2
    assert "cannot decide: the server did not answer" in unreachable.stderr


def test_top_up_waits_for_the_settled_decision(server_url, token):
    # Runs executed by the server (simulated target, eager tasks): c00 truly dropped
    # (1.0 -> 0.3), a suspect at the first look that more trials settle as a regression.
    suite = make_suite()
    base, head = executed(suite, "base", sim(1)), executed(suite, "head", sim(1003, c00=0.3))
    env = client_env(server_url, token)
    settled = assay_gate(
        "--head", str(head.uuid), "--base", str(base.uuid), "--top-up", "--timeout", "20", env=env
    )
    assert settled.returncode == 1, settled.stdout + settled.stderr
    top_up = TopUp.objects.get()
    assert top_up.status == "settled" and top_up.rounds_done == 2


def test_a_run_with_errored_tests_cannot_decide(recorded):
    # What the plugin sends for a test that raised (assay_client.trials: an errored trial).
    trials = _trials(set())
    for trial in trials[:5]:
        del trial["passed"]
        trial["status"] = "error"
        trial["error_message"] = "TimeoutError: pipeline timed out"
    with AssayClient(recorded["ASSAY_URL"], token=recorded["ASSAY_TOKEN"]) as client:
        client.ingest({"suite": "policy", "run": "broken"}, trials)
    broken = assay_gate("--head", "policy/broken", "--base", "policy/base", env=recorded)
    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert broken.stdout.startswith("Cannot decide: head has 5 errored trial(s) of 40")
