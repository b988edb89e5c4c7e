"""The pytest plugin end to end: a separate pytest session (as in a user's project) records
its tests as trials of a run on a live Assay server, through bulk ingest."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from evals.models import Grade, Run, Trial
from tests.clients.processes import client_env, run_pytest

# serialized_rollback: the transactional flush would drop the role groups of a data migration.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

EVALS = """
import collections
import pytest

CALLS = collections.Counter()


@pytest.mark.billing
@pytest.mark.parametrize("question", ["q1", "q2", "q3"])
def test_answer(question, record_property):
    CALLS[question] += 1
    record_property("output", f"answer to {question}")
    record_property("judge_notes", {"calls": CALLS[question]})
    # q2 fails on its second call only: a flaky case.
    assert not (question == "q2" and CALLS[question] == 2), "wrong answer"
"""

OUTCOMES = """
import pytest


@pytest.fixture
def broken_setup():
    raise RuntimeError("the pipeline's client did not start")


@pytest.fixture
def asserting_setup():
    assert False, "precondition"


@pytest.fixture
def broken_teardown():
    yield
    raise OSError("cleanup failed")


def test_passes():
    assert 1 + 1 == 2


def test_asserts():
    assert 1 + 1 == 3


def test_calls_fail():
    pytest.fail("refused the policy")


def test_raises():
    raise ValueError("unparseable answer")


def test_setup_error(broken_setup):
    assert True


def test_setup_assertion(asserting_setup):
    assert True


def test_teardown_error(broken_teardown):
    assert True


def test_skipped():
    pytest.skip("not today")


@pytest.mark.skipif(True, reason="never")
def test_skipped_by_mark():
    assert True


@pytest.mark.xfail(reason="known")
def test_known_failure():
    assert False
"""


def _trials(run: Run) -> list[Trial]:
    return list(Trial.objects.filter(run=run).select_related("case").prefetch_related("grades"))


def _write(folder, text: str, name: str = "test_evals.py") -> None:
    (folder / name).write_text(text, encoding="utf-8")


def _check_repeated_run(run: Run, n: int) -> None:
    """3 cases x n attempts, keys without the repeat id, q2 failed once, the properties."""
    trials = _trials(run)
    assert len(trials) == 3 * n
    attempts: dict[str, list[int]] = {}
    for trial in trials:
        attempts.setdefault(trial.case.key, []).append(trial.attempt)
    assert {k: sorted(v) for k, v in attempts.items()} == {
        f"test_evals.py::test_answer[{q}]": list(range(1, n + 1)) for q in ("q1", "q2", "q3")
    }
    verdicts = Counter(
        (t.case.key.split("[")[1][:2], g.passed)
        for t in trials
        for g in t.grades.all()
        if g.grader == "pytest" and g.status == Grade.Status.OK
    )
    assert verdicts == {("q1", True): n, ("q2", True): n - 1, ("q2", False): 1, ("q3", True): n}
    q1 = next(t for t in trials if t.case.key.endswith("[q1]"))
    assert q1.output == "answer to q1"
    assert q1.case.tags == ["billing"]
    assert q1.raw_response["extra"]["judge_notes"]["calls"] in range(1, n + 1)
    assert q1.latency_ms is not None and q1.latency_ms >= 0
    failed = next(
        g for t in trials for g in t.grades.all() if g.passed is False and g.grader == "pytest"
    )
    assert "wrong answer" in failed.reason


def test_a_repeated_parametrized_test_becomes_n_trials_per_case(server_url, token, tmp_path):
    _write(tmp_path, EVALS)
    output = tmp_path / "assay-run.json"
    session = run_pytest(
        tmp_path,
        "--assay-suite=checkout",
        "--assay-run=nightly-1",
        "--assay-repeat=4",
        f"--assay-output={output}",
        "--assay-source-version=3f2c1e0",
        env=client_env(server_url, token),
    )
    assert session.returncode == 1, session.stdout + session.stderr  # q2 failed once
    assert "assay: recorded run 'nightly-1' of suite 'checkout': 12 trials of 3 cases" in (
        session.stdout
    )
    run = Run.objects.get(suite__name="checkout", name="nightly-1")
    assert str(run.uuid) == json.loads(output.read_text())["run"]
    assert run.status == Run.Status.SUCCEEDED and run.source_version == "3f2c1e0"
    _check_repeated_run(run, 4)


def test_pytest_repeats_count_is_read_the_same_way(server_url, token, tmp_path):
    _write(tmp_path, EVALS)
    session = run_pytest(
        tmp_path,
        "--assay-suite=checkout",
        "--assay-run=nightly-2",
        "--count=3",
        env=client_env(server_url, token),
    )
    assert "12 trials" not in session.stdout
    assert "9 trials of 3 cases" in session.stdout, session.stdout + session.stderr
    _check_repeated_run(Run.objects.get(name="nightly-2"), 3)


def test_errors_are_errored_trials_and_skips_are_not_sent(server_url, token, tmp_path):
    _write(tmp_path, OUTCOMES)
    session = run_pytest(
        tmp_path, "--assay-suite=outcomes", "--assay-run=r", env=client_env(server_url, token)
    )
    assert "8 trials of 8 cases" in session.stdout, session.stdout + session.stderr
    trials = {
        t.case.key.removeprefix("test_evals.py::"): t for t in _trials(Run.objects.get(name="r"))
    }
    outcomes = {}
    for name, trial in trials.items():
        grade = trial.grades.filter(grader="pytest").first()
        outcomes[name] = (trial.status, None if grade is None else (grade.status, grade.passed))
    assert outcomes == {
        "test_passes": (Trial.Status.OK, (Grade.Status.OK, True)),
        "test_asserts": (Trial.Status.OK, (Grade.Status.OK, False)),
        "test_calls_fail": (Trial.Status.OK, (Grade.Status.OK, False)),
        "test_known_failure": (Trial.Status.OK, (Grade.Status.OK, False)),
        # Never a pass, never a skip, never a plain fail: an errored trial, with no grade.
        "test_raises": (Trial.Status.ERROR, None),
        "test_setup_error": (Trial.Status.ERROR, None),
        "test_setup_assertion": (Trial.Status.ERROR, None),
        "test_teardown_error": (Trial.Status.ERROR, None),
    }
    assert trials["test_raises"].error_message == "ValueError: unparseable answer"
    assert trials["test_setup_error"].error_message.startswith(
        "error in setup: RuntimeError: the pipeline's client did not start"
    )
    assert trials["test_teardown_error"].error_message.startswith("error in teardown: OSError")
    assert Run.objects.get(name="r").trials_errored == 4
    grades = {name: t.grades.filter(grader="pytest").first() for name, t in trials.items()}
    assert "refused the policy" in grades["test_calls_fail"].reason


def test_a_repeated_post_under_a_used_run_key_writes_nothing_and_fails_the_session(
    server_url, token, tmp_path
):
    _write(tmp_path, EVALS)
    env = client_env(server_url, token)
    args = ("--assay-suite=checkout", "--assay-run=nightly-3", "--assay-repeat=2")
    assert "6 trials of 3 cases" in run_pytest(tmp_path, *args, env=env).stdout
    # The same run again: other latencies, so another body under the key pytest:checkout/nightly-3.
    again = run_pytest(tmp_path, *args, env=env)
    assert again.returncode == 3, again.stdout + again.stderr
    assert "assay: the run was NOT recorded: HTTP 409 (field run_key)" in again.stdout, (
        again.stdout[-1500:]
    )
    assert Run.objects.filter(name="nightly-3").count() == 1
    assert Trial.objects.filter(run__name="nightly-3").count() == 6


def test_without_a_token_the_session_stops_before_running_anything(server_url, tmp_path):
    _write(tmp_path, EVALS)
    env = client_env(server_url, "x")
    del env["ASSAY_TOKEN"]
    session = run_pytest(tmp_path, "--assay-suite=checkout", env=env)
    assert session.returncode == 4  # pytest's usage error
    assert "needs an API token in ASSAY_TOKEN" in session.stderr
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--assay-suite=", "--assay-run=r"], "--assay-suite: empty"),
        (["--assay-suite=  ", "--assay-run=r"], "--assay-suite: empty"),
        (["--assay-suite=checkout", "--assay-run= "], "--assay-run: empty"),
    ],
)
def test_an_empty_suite_or_run_name_stops_the_session_before_any_test(
    server_url, token, tmp_path, args, says
):
    """`--assay-suite "$SUITE"` with SUITE unset ran every test and silently recorded
    nothing (an empty name turned the plugin off); a blank name ran every test, then
    failed to record. Both are usage errors now, before anything runs."""
    _write(tmp_path, EVALS)
    session = run_pytest(tmp_path, *args, env=client_env(server_url, token))
    assert session.returncode == 4, session.stdout + session.stderr  # pytest's usage error
    assert says in session.stderr
    assert "passed" not in session.stdout and not Run.objects.exists()


def test_under_xdist_the_controller_sends_one_run_with_every_trial(server_url, token, tmp_path):
    _write(tmp_path, EVALS.replace("CALLS[question] == 2", "False"))
    session = run_pytest(
        tmp_path,
        "-n2",
        "--assay-suite=checkout",
        "--assay-run=parallel",
        "--assay-repeat=2",
        env=client_env(server_url, token),
    )
    assert "6 trials of 3 cases" in session.stdout, session.stdout + session.stderr
    trials = _trials(Run.objects.get(name="parallel"))
    assert sorted((t.case.key[-3:-1], t.attempt) for t in trials) == [
        (q, a) for q in ("q1", "q2", "q3") for a in (1, 2)
    ]
    assert all(t.output.startswith("answer to q") for t in trials)


def test_a_session_stopped_early_sends_nothing_and_repeat_options_do_not_mix(
    server_url, token, tmp_path
):
    _write(tmp_path, EVALS)
    env = client_env(server_url, token)
    stopped = run_pytest(
        tmp_path, "-x", "--assay-suite=checkout", "--assay-repeat=3", "--assay-run=x", env=env
    )
    assert stopped.returncode == 1
    assert "assay: nothing sent: the session stopped early" in stopped.stdout
    both = run_pytest(tmp_path, "--assay-suite=checkout", "--assay-repeat=3", "--count=3", env=env)
    assert both.returncode == 4 and "not both" in both.stderr
    assert not Run.objects.exists()


UNSTORABLE = """
def test_records_what_a_database_cannot_store(record_property):
    record_property("output", "a\\ud800b\\x00")
    record_property("notes", {"k": ["\\udc00"]})
    raise ValueError("bad \\ud83d reply")
"""


def test_under_xdist_unstorable_text_a_test_recorded_is_replaced_where_it_ran(
    server_url, token, tmp_path
):
    """A lone surrogate in a ``record_property`` value crashed pytest-xdist's channel from
    the worker to the controller, and the whole session's trials were lost. The plugin now
    replaces it (and U+0000) with U+FFFD where the test ran, and counts it."""
    (tmp_path / "test_unstorable.py").write_text(UNSTORABLE)
    session = run_pytest(
        tmp_path, "-n2", "--assay-suite=hostile", "--assay-run=x", env=client_env(server_url, token)
    )
    assert "1 trials of 1 cases" in session.stdout, session.stdout + session.stderr
    (trial,) = _trials(Run.objects.get(name="x"))
    assert trial.status == Trial.Status.ERROR
    assert trial.output == "a\ufffdb\ufffd"
    assert trial.error_message.endswith("bad \ufffd reply")
    assert trial.raw_response["extra"]["notes"] == {"k": ["\ufffd"]}
    assert trial.raw_response["extra"]["unstorable_replaced"] == 4
