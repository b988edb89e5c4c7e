"""Run fingerprints (``evals.fingerprint``): the key moves with every change a reader of a
finished run can see (trials, grades, a regrade in place, status, grader set) and with
nothing else; one query at any size; the grid's column key and the comparison's summary
key are both built on it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.case_changes import case_edit
from evals.cases import CaseSpec
from evals.comparison.summary import run_summary_keys
from evals.fingerprint import (
    case_changes_fingerprints,
    judge_trust_fingerprint,
    run_fingerprints,
)
from evals.grid.cache import grid_column_state
from evals.models import Case, CaseChange, Grade, Run, Trial
from tests.comparison_builders import db_run, judge_version
from tests.judge_builders import trust
from tests.report_builders import add_trial

pytestmark = pytest.mark.django_db


def _key(run: Run) -> str | None:
    run.refresh_from_db()
    return run_fingerprints(runs=[run])[run.id].key


def _grade(run: Run, key: str, attempt: int):
    return Grade.objects.filter(trial__run=run, trial__case__key=key, trial__attempt=attempt)


def test_a_finished_runs_key_is_stable_and_a_running_run_has_none_but_says_who_graded():
    run = db_run({"a": "PPF", "b": "FXE"}, name="r1")
    first = run_fingerprints(runs=[run])[run.id]
    assert first.key is not None and first.key.startswith("succeeded:3:")
    assert first.graded == frozenset({"judge"})
    assert run_fingerprints(runs=[run])[run.id] == first
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    running = run_fingerprints(runs=[run])[run.id]
    assert running.key is None and running.state.startswith("running:3:")
    assert running.state.split(":")[2] == first.key.split(":")[2]  # the same trials and grades
    assert run_fingerprints(runs=[run])[run.id].graded == frozenset({"judge"})
    assert run_fingerprints(runs=[]) == {}


@pytest.mark.parametrize(
    "change",
    [
        # grades changed in place (no new row)
        lambda run: _grade(run, "a", 3).update(passed=True),
        lambda run: _grade(run, "a", 1).update(passed=False),
        lambda run: _grade(run, "a", 3).update(passed=None, status=Grade.Status.ERROR),
        lambda run: _grade(run, "a", 3).update(passed=None, status=Grade.Status.NOT_JUDGED),
        lambda run: _grade(run, "b", 3).update(passed=True, status=Grade.Status.OK),
        lambda run: _grade(run, "a", 1).update(gating=False),
        lambda run: _grade(run, "a", 1).update(judge_version=judge_version(1)),
        # two regrades in opposite directions: the counts per verdict stay as they were
        lambda run: (
            _grade(run, "a", 1).update(passed=False),
            _grade(run, "a", 3).update(passed=True),
        ),
        # new rows, deleted rows
        lambda run: Grade.objects.create(
            trial=Trial.objects.get(run=run, case__key="b", attempt=2),
            grader="late",
            status="ok",
            passed=True,
        ),
        lambda run: _grade(run, "a", 2).delete(),
        lambda run: add_trial(run, "a", 4, grades={"judge": True}),
        # trials changed in place
        lambda run: Trial.objects.filter(run=run, case__key="a", attempt=2).update(
            status=Trial.Status.ERROR
        ),
        lambda run: Trial.objects.filter(run=run, case__key="b", attempt=2).update(
            replaced_by=add_trial(run, "b", 4, grades={"judge": True})
        ),
        # the run itself
        lambda run: Run.objects.filter(id=run.id).update(status=Run.Status.CANCELLED),
        lambda run: Run.objects.filter(id=run.id).update(
            graders=[{"key": "judge", "kind": "judge", "gating": False}]
        ),
    ],
)
def test_every_change_a_reader_sees_moves_the_key(change):
    run = db_run({"a": "PPF", "b": "FXE"}, name="r1")
    other = db_run({"a": "PPF", "b": "FXE"}, name="r2")
    before, other_before = _key(run), _key(other)
    change(run)
    assert _key(run) != before
    assert _key(other) == other_before


def test_what_no_reader_reads_of_a_grade_leaves_the_key():
    run = db_run({"a": "PPF"}, name="r1")
    before = _key(run)
    _grade(run, "a", 1).update(score=0.25, reason="edited", details={"note": 1})
    assert _key(run) == before


def test_one_query_whatever_the_number_and_size_of_runs():
    small = [db_run({"a": "P"}, name="s1")]
    big = [db_run({f"k{i}": "PFXE" for i in range(15)}, name=f"b{j}", suite="B") for j in range(3)]
    for runs in (small, big):
        with CaptureQueriesContext(connection) as ctx:
            run_fingerprints(runs=runs)
        assert len(ctx.captured_queries) == 1


def test_the_grid_and_the_summary_keys_both_move_with_a_regrade_in_place():
    run = db_run({"a": "PPF"}, name="r1")
    grid, summary = grid_column_state(runs=[run])[0], run_summary_keys(runs=[run])
    fingerprint = run_fingerprints(runs=[run])[run.id].key
    assert fingerprint in grid[run.id] and fingerprint in summary[run.id]
    _grade(run, "a", 1).update(passed=False)
    _grade(run, "a", 3).update(passed=True)
    assert grid_column_state(runs=[run])[0][run.id] != grid[run.id]
    assert run_summary_keys(runs=[run])[run.id] != summary[run.id]


def test_judge_trust_and_case_changes_have_their_own_fingerprints(carol):
    version = judge_version(1, trusted=False)
    before = judge_trust_fingerprint()
    assert before == "j0.None.0"
    trust(version)
    assert judge_trust_fingerprint() != before
    run = db_run({"a": "P"}, name="r1")
    assert case_changes_fingerprints(suite_ids=[run.suite_id]) == {run.suite_id: "c0.None"}
    case = Case.objects.get(suite=run.suite, key="a")
    case_edit(case=case, spec=CaseSpec(key="a", input="a", expected=None, tags=["t"]), by=carol)
    change = CaseChange.objects.get(suite=run.suite)
    assert case_changes_fingerprints(suite_ids=[run.suite_id]) == {run.suite_id: f"c1.{change.id}"}
