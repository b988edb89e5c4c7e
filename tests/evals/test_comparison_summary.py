"""Run summaries (``evals.comparison.summary``): a finished run's ``RunData`` and detectable
drop stored once and read by every comparison, equal to what the run loader builds, and
never read once anything they depend on has changed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.case_changes import case_add, case_edit
from evals.cases import CaseSpec
from evals.comparison import compute
from evals.comparison.compute import base_detectable_drop, comparison_compute
from evals.comparison.run_data import run_data_get
from evals.comparison.selectors import comparison_get
from evals.comparison.summary import (
    detectable_drop_get,
    run_summaries_get,
    run_summary_keys,
    run_summary_refresh,
)
from evals.models import Grade, Run, RunSummary, Suite, Trial
from evals.runner.finalize import run_finalize
from tests.comparison_builders import db_run, judge_version
from tests.judge_builders import trust

pytestmark = pytest.mark.django_db

BASE = {"c1": "PPPX", "c2": "FFFE", "c3": "PPFP", "c4": "PPPP", "c5": "FPFX"}
HEAD = {"c1": "FFPP", "c2": "PPPP", "c3": "PFFE", "c4": "PPPP", "c5": "XXXX"}


def _runs():
    base = db_run(BASE, name="base", cost=None)
    head = db_run(HEAD, name="head")
    return base, head


def test_a_stored_summary_reads_back_equal_to_the_run_loader():
    base, head = _runs()
    first = run_summaries_get(runs=[base, head], detectable_for=[base])
    assert RunSummary.objects.count() == 2
    again = run_summaries_get(runs=[base, head], detectable_for=[base])
    for run in (base, head):
        loaded = run_data_get(run=run)
        assert first[run.id].data == loaded
        assert again[run.id].data == loaded
    expected = base_detectable_drop(run_data_get(run=base), alpha=0.05)
    assert again[base.id].detectable[0.05] == expected == first[base.id].detectable[0.05]


def test_the_comparison_from_summaries_is_the_comparison_from_the_loader():
    base, head = _runs()
    direct = comparison_compute(
        base=run_data_get(run=base),
        head=run_data_get(run=head),
        detectable=base_detectable_drop(run_data_get(run=base)),
    )
    assert comparison_get(base=base, head=head) == direct  # computes and stores
    assert comparison_get(base=base, head=head) == direct  # reads the stored rows


def test_a_stored_summary_reads_no_trial_row_whatever_the_run_size():
    counts = []
    for size in (3, 30):
        cases = {f"k{size}-{i}": "PFP" for i in range(size)}
        base = db_run(cases, name=f"base{size}", suite=f"S{size}")
        head = db_run(cases, name=f"head{size}", suite=f"S{size}")
        comparison_get(base=base, head=head)
        with CaptureQueriesContext(connection) as ctx:
            comparison_get(base=base, head=head)
        sql = [q["sql"] for q in ctx.captured_queries]
        # The trial table is read only by the key's aggregate (COUNT/MAX), never row by row.
        trial_reads = [s for s in sql if '"evals_trial"' in s and "COUNT(" not in s.upper()]
        assert trial_reads == []
        counts.append(len(sql))
    assert counts[0] == counts[1]


def test_a_regrade_in_place_is_read_at_once():
    base, head = _runs()
    before = run_summaries_get(runs=[head])[head.id].data
    assert next(c for c in before.cases if c.key == "c4").passed == 4
    Grade.objects.filter(trial__run=head, trial__case__key="c4", trial__attempt=1).update(
        passed=False
    )
    after = run_summaries_get(runs=[head])[head.id].data
    assert next(c for c in after.cases if c.key == "c4").passed == 3
    assert after == run_data_get(run=head)


def test_opposite_regrades_and_a_fail_turned_not_judged_are_read_at_once():
    # Each keeps the run's counts of passing and errored grades (the former key's terms).
    base, head = _runs()
    run_summaries_get(runs=[head])
    Grade.objects.filter(trial__run=head, trial__case__key="c1", trial__attempt=1).update(
        passed=True
    )
    Grade.objects.filter(trial__run=head, trial__case__key="c1", trial__attempt=3).update(
        passed=False
    )
    after = run_summaries_get(runs=[head])[head.id].data
    assert next(c for c in after.cases if c.key == "c1").verdicts == (True, False, False, True)
    assert after == run_data_get(run=head)
    Grade.objects.filter(trial__run=head, trial__case__key="c1", trial__attempt=2).update(
        passed=None, status=Grade.Status.NOT_JUDGED
    )
    after = run_summaries_get(runs=[head])[head.id].data
    assert next(c for c in after.cases if c.key == "c1").verdicts == (True, False, True)
    assert after == run_data_get(run=head)


def test_a_new_trial_and_a_retry_are_read_at_once():
    base, head = _runs()
    run_summaries_get(runs=[head])
    trial = Trial.objects.get(run=head, case__key="c5", attempt=1)
    retry = Trial.objects.create(
        run=head, case=trial.case, attempt=5, status=Trial.Status.OK, output="x"
    )
    Grade.objects.create(trial=retry, grader="judge", passed=True, status=Grade.Status.OK)
    Trial.objects.filter(id=trial.id).update(replaced_by=retry)
    after = run_summaries_get(runs=[head])[head.id].data
    assert after == run_data_get(run=head)
    assert next(c for c in after.cases if c.key == "c5").verdicts == (True,)


def test_a_retagged_case_is_read_at_once(carol):
    suite = Suite.objects.create(name="S", kind="regression")
    case_add(suite=suite, spec=CaseSpec(key="c1", input="c1", expected=None, tags=["a"]), by=carol)
    head = db_run({"c1": "PPF", "c2": "PPP"}, name="head")
    assert run_summaries_get(runs=[head])[head.id].data.cases[0].tags == ("a",)
    case = head.trials.get(attempt=1, case__key="c1").case
    case_edit(
        case=case, spec=CaseSpec(key="c1", input="c1", expected=None, tags=["a", "b"]), by=carol
    )
    assert run_summaries_get(runs=[head])[head.id].data.cases[0].tags == ("a", "b")


def test_a_newly_trusted_judge_version_is_read_at_once():
    version = judge_version(1, trusted=False)
    head = db_run({"c1": "PPF", "c2": "PFF"}, name="head", version=version)
    before = run_summaries_get(runs=[head])[head.id].data
    assert before.graders[0].judge_trusted is False and before.provisional == 6
    trust(version)
    after = run_summaries_get(runs=[head])[head.id].data
    assert after.graders[0].judge_trusted is True and after.provisional == 0
    assert after == run_data_get(run=head)


def test_a_run_that_is_not_finished_has_no_summary():
    base, head = _runs()
    Run.objects.filter(id=head.id).update(status=Run.Status.RUNNING)
    head.refresh_from_db()
    assert run_summary_keys(runs=[head]) == {head.id: None}
    assert comparison_get(base=base, head=head).head == run_data_get(run=head)
    assert not RunSummary.objects.filter(run=head).exists()
    run_summary_refresh(run=head)
    assert not RunSummary.objects.filter(run=head).exists()


def test_finishing_a_run_stores_its_summary_with_the_gates_detectable_drop():
    head = db_run({"c1": "PPF", "c2": "PPP"}, name="head")
    Run.objects.filter(id=head.id).update(status=Run.Status.RUNNING)
    run = run_finalize(run_id=head.id)
    assert run.status == Run.Status.SUCCEEDED
    summary = RunSummary.objects.get(run=head)
    assert summary.key == run_summary_keys(runs=[run])[run.id]
    assert set(summary.detectable) == {"0.05"}
    run_finalize(run_id=head.id)  # again: a no-op, the run is closed
    assert RunSummary.objects.filter(run=head).count() == 1


def test_the_same_run_on_both_sides_is_read_once():
    base, _ = _runs()
    comparison = comparison_get(base=base, head=base)
    assert comparison.problems and RunSummary.objects.filter(run=base).count() == 1
    assert comparison_get(base=base, head=base) == comparison


def _simulator_refused(*args, **kwargs):
    raise AssertionError("the detectable drop was simulated again")


def test_a_finished_runs_detectable_drop_is_its_stored_summarys(monkeypatch):
    base, _ = _runs()
    expected = base_detectable_drop(run_data_get(run=base), alpha=0.05)
    assert expected is not None
    run_summary_refresh(run=base)  # as run_finalize does: stores the drop at 0.05
    assert RunSummary.objects.get(run=base).detectable["0.05"]["drop"] == expected.drop
    monkeypatch.setattr(compute, "min_detectable_drop", _simulator_refused)
    with CaptureQueriesContext(connection) as ctx:
        assert detectable_drop_get(run=base, alpha=0.05) == expected
    assert len(ctx.captured_queries) == 4  # the key's three and the summary's row


def test_another_alpha_is_computed_once_and_stored_in_the_summary(monkeypatch):
    base, _ = _runs()
    run_summary_refresh(run=base)
    expected = base_detectable_drop(run_data_get(run=base), alpha=0.1)
    assert detectable_drop_get(run=base, alpha=0.1) == expected
    assert set(RunSummary.objects.get(run=base).detectable) == {"0.05", "0.1"}
    monkeypatch.setattr(compute, "min_detectable_drop", _simulator_refused)
    assert detectable_drop_get(run=base, alpha=0.1) == expected


def test_a_running_runs_detectable_drop_moves_with_a_regrade_in_place():
    base, _ = _runs()
    Run.objects.filter(id=base.id).update(status=Run.Status.RUNNING)
    base.refresh_from_db()
    before = detectable_drop_get(run=base)
    assert before == base_detectable_drop(run_data_get(run=base))
    # c4 passed 4 of 4; two of its grades fail now, on the same rows (no trial finishes).
    Grade.objects.filter(trial__run=base, trial__case__key="c4", trial__attempt__lte=2).update(
        passed=False
    )
    after = detectable_drop_get(run=base)
    assert after == base_detectable_drop(run_data_get(run=base))
    assert after != before
