"""The grid's cells counted in the database (``evals.grid.cells``) equal the run report's
rule applied to the run loader's rows (``overall_codes_from_rows`` over ``runs_rows_get``)
on generated runs: every status, every grade outcome, gating and non-gating graders, a
grader outside the grader set with mixed gating flags, retried trials, and runs of one
suite with different grader sets read together."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.grid.cache import grid_column_state
from evals.grid.cells import runs_case_counts, runs_gating_keys
from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.build import overall_codes_from_rows
from evals.report.rows import runs_rows_get
from tests.report_builders import ERR, NJ, add_trial, make_run

pytestmark = pytest.mark.django_db

GRADER_SETS = {
    "two gating, one not": [
        {"key": "a", "kind": "exact"},
        {"key": "b", "kind": "contains"},
        {"key": "c", "kind": "regex", "gating": False},
    ],
    "one gating": [{"key": "a", "kind": "exact"}],
    "none gating": [{"key": "c", "kind": "regex", "gating": False}],
}
MISSING = "missing"
GRADE = st.sampled_from([True, False, ERR, NJ, MISSING])
# An outside grader's grade: its verdict and the gating flag stored on it.
OUTSIDE = st.one_of(st.just(MISSING), st.tuples(st.sampled_from([True, False, ERR]), st.booleans()))
STATUS = st.sampled_from(["ok", "ok", "ok", "error", "queued", "running", "cancelled"])
TRIAL = st.tuples(STATUS, GRADE, GRADE, GRADE, OUTSIDE, st.booleans())
RUN = st.tuples(
    st.sampled_from(sorted(GRADER_SETS)),
    st.lists(st.lists(TRIAL, min_size=1, max_size=3), min_size=1, max_size=4),
)


def _build(runs_spec) -> list[Run]:
    runs = []
    for r, (graders, cases) in enumerate(runs_spec):
        run = make_run(
            cases=[(f"c{i}", []) for i in range(len(cases))],
            graders=GRADER_SETS[graders],
            n=3,
            name=f"R{r}",
        )
        for i, trials in enumerate(cases):
            for attempt, (status, a, b, c, outside, retried) in enumerate(trials, start=1):
                grades = {k: v for k, v in zip("abc", (a, b, c), strict=True) if v is not MISSING}
                trial = add_trial(run, f"c{i}", attempt, status=status, grades=grades)
                if outside is not MISSING:
                    verdict, gates = outside
                    Grade.objects.create(
                        trial=trial,
                        grader="x",
                        gating=gates,
                        status="error" if verdict is ERR else "ok",
                        passed=None if verdict is ERR else verdict,
                    )
                if retried:  # a retry replaced this trial: neither path may read it
                    again = add_trial(run, f"c{i}", 10 + attempt, grades={"a": True, "x": False})
                    Trial.objects.filter(id=trial.id).update(replaced_by=again)
        runs.append(run)
    return runs


def _counted(runs: list[Run]) -> dict:
    graded = grid_column_state(runs=runs)[1]
    counts = runs_case_counts(runs=runs, gating=runs_gating_keys(runs=runs, graded=graded))
    out = {}
    for run in runs:
        c, t = counts[run.id], counts[run.id].tally
        for i, case_id in enumerate(c.case_ids.tolist()):
            out[run.id, case_id] = (
                int(t.passed[i]),
                int(t.graded[i]),
                int(t.grade_errors[i]),
                int(t.not_graded[i]),
                int(t.pipeline_errors[i]),
                int(t.pending[i]),
                int(c.trials[i]),
            )
    return out


def _loaded(runs: list[Run]) -> dict:
    rows = runs_rows_get(runs=runs, usage=False)
    out = {}
    for run in runs:
        oc = overall_codes_from_rows(run=run, rows=rows[run.id])
        t, trials = oc.tally, np.bincount(oc.case_idx, minlength=len(rows[run.id].cases))
        for i, case in enumerate(rows[run.id].cases):
            out[run.id, case[0]] = (
                int(t.passed[i]),
                int(t.graded[i]),
                int(t.grade_errors[i]),
                int(t.not_graded[i]),
                int(t.pipeline_errors[i]),
                int(t.pending[i]),
                int(trials[i]),
            )
    return out


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(runs_spec=st.lists(RUN, min_size=1, max_size=3))
def test_counted_cells_equal_the_rule_over_the_loaded_rows(runs_spec):
    Grade.objects.all().delete()
    Trial.objects.all().delete()
    Run.objects.all().delete()
    Case.objects.all().delete()
    Suite.objects.all().delete()
    runs = _build(runs_spec)
    assert _counted(runs) == _loaded(runs)


def test_an_outside_grader_gates_only_when_one_of_its_grades_on_a_readable_ok_trial_says_so():
    run = make_run(cases=[("c0", []), ("c1", [])], graders=GRADER_SETS["one gating"], n=2)
    ok = add_trial(run, "c0", 1, grades={"a": True})
    Grade.objects.create(trial=ok, grader="x", gating=False, status="ok", passed=False)
    # A gating grade of y on an errored trial, and of z on a retried one: not read.
    errored = add_trial(run, "c1", 1, status="error")
    Grade.objects.create(trial=errored, grader="y", gating=True, status="ok", passed=False)
    retried = add_trial(run, "c1", 2, grades={"a": True})
    Grade.objects.create(trial=retried, grader="z", gating=True, status="ok", passed=False)
    again = add_trial(run, "c1", 3, grades={"a": True})
    Trial.objects.filter(id=retried.id).update(replaced_by=again)
    graded = grid_column_state(runs=[run])[1]
    assert graded[run.id] == {"a", "x", "y", "z"}
    assert runs_gating_keys(runs=[run], graded=graded) == {run.id: ["a"]}
    Grade.objects.create(
        trial=add_trial(run, "c0", 2, grades={"a": True}),
        grader="x",
        gating=True,
        status="ok",
        passed=True,
    )
    graded = grid_column_state(runs=[run])[1]
    assert runs_gating_keys(runs=[run], graded=graded) == {run.id: ["a", "x"]}
    assert _counted([run]) == _loaded([run])


def test_one_query_counts_runs_with_different_grader_sets():
    runs = _build(
        [
            ("two gating, one not", [[("ok", True, False, True, MISSING, False)]] * 3),
            ("one gating", [[("ok", True, MISSING, MISSING, MISSING, False)]] * 5),
            ("none gating", [[("error", MISSING, MISSING, MISSING, MISSING, False)]]),
        ]
    )
    gating = runs_gating_keys(runs=runs, graded=grid_column_state(runs=runs)[1])
    assert list(gating.values()) == [["a", "b"], ["a"], []]
    with CaptureQueriesContext(connection) as ctx:
        counts = runs_case_counts(runs=runs, gating=gating)
    assert len(ctx.captured_queries) == 1
    assert [int(counts[r.id].tally.passed.sum()) for r in runs] == [0, 5, 0]
    assert [int(counts[r.id].tally.graded.sum()) for r in runs] == [3, 5, 0]
    assert int(counts[runs[2].id].tally.pipeline_errors.sum()) == 1
    assert _counted(runs) == _loaded(runs)
