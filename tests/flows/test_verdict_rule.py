"""The overall-verdict rule ("every gating grader passed") has one definition,
``evals.grading.verdict``, in two forms: numpy codes (the run report and the comparison's run
loader) and SQL annotations (the run list's aggregates). They must agree on every trial."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.comparison.run_data import run_data_get
from evals.grading.verdict import ERRORED, FAIL, PASS, PENDING, PIPELINE, grader_codes
from evals.grading.verdict import MISSING as MISSING_CODE
from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from evals.selectors import run_list_stats
from tests.report_builders import ERR, NJ, add_trial, make_run

GRADERS = [
    {"key": "a", "kind": "exact"},
    {"key": "b", "kind": "contains"},
    {"key": "c", "kind": "regex", "gating": False},
]
MISSING = "missing"
GRADE = st.sampled_from([True, False, ERR, MISSING, NJ])
TRIAL = st.tuples(st.sampled_from(["ok", "ok", "ok", "error"]), GRADE, GRADE, GRADE)


@pytest.mark.django_db
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cases=st.lists(st.lists(TRIAL, min_size=1, max_size=3), min_size=1, max_size=4))
def test_the_report_the_run_list_and_the_run_loader_decide_every_trial_alike(cases):
    Grade.objects.all().delete()
    Trial.objects.all().delete()
    Run.objects.all().delete()
    Case.objects.all().delete()
    Suite.objects.all().delete()
    run = make_run(cases=[(f"c{i}", []) for i in range(len(cases))], graders=GRADERS, n=3)
    for i, trials in enumerate(cases):
        for attempt, (status, *verdicts) in enumerate(trials, start=1):
            grades = {key: v for key, v in zip("abc", verdicts, strict=True) if v is not MISSING}
            if grades.get("a") is not False:  # the ladder skips a rung only after a failure
                grades = {k: v for k, v in grades.items() if v is not NJ}
            add_trial(run, f"c{i}", attempt, status=status, grades=grades if status == "ok" else {})
    report = run_report(run=run).overall
    stats = run_list_stats(runs=[run])[run.id]
    data = run_data_get(run=run)
    assert (stats.passed, stats.graded) == (report.trials_passed, report.trials_graded)
    assert (sum(c.passed for c in data.cases), sum(c.graded for c in data.cases)) == (
        report.trials_passed,
        report.trials_graded,
    )
    assert stats.judge_errors == report.grades_errored == data.grade_errored
    rate = report.pass_rate.mean
    assert (stats.pass_rate is None) == (rate is None)
    if rate is not None:
        assert stats.pass_rate == pytest.approx(rate)


def test_a_grader_s_codes_keep_the_trial_s_own_code_and_its_last_grade():
    trial_codes = np.array([PASS, PASS, PASS, PIPELINE, PENDING])
    codes = grader_codes(
        trial_codes=trial_codes,
        trial_pos=np.array([0, 1, 0, 3, 4]),
        grade_codes=np.array([FAIL, ERRORED, PASS, PASS, PASS]),
    )
    assert codes.tolist() == [PASS, ERRORED, MISSING_CODE, PIPELINE, PENDING]
