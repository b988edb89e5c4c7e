"""The one run loader (``evals.report.rows``): which trials, grades and cases it reads."""

from __future__ import annotations

import dataclasses
import uuid

from evals.models import Case, Grade, TopUp, Trial
from evals.report.rows import run_rows_get, runs_rows_get
from tests.comparison_builders import db_run


def _copy(trial: Trial, **changes) -> Trial:
    """A new trial like ``trial`` (its grades copied too) with ``changes``."""
    grades = list(trial.grades.all())
    trial.pk, trial.uuid = None, uuid.uuid4()
    for field, value in changes.items():
        setattr(trial, field, value)
    trial.save()
    for grade in grades:
        grade.pk, grade.trial = None, trial
        grade.save()
    return trial


def test_it_reads_grades_and_cases_of_the_readable_trials_only(db):
    base = db_run({"c1": "PF", "c2": "PP", "c3": "FX"}, name="B")
    head = db_run({"c1": "FF", "c2": "PF", "c3": "PP"}, name="H")
    top_up = TopUp.objects.create(base=base, head=head, max_trials_per_case=4)
    other = TopUp.objects.create(base=head, head=base, max_trials_per_case=4)
    first = Trial.objects.filter(run=head, case__key="c1", attempt=1).get()
    _copy(first, attempt=11, top_up=top_up, top_up_round=1)
    _copy(first, attempt=12, top_up=other, top_up_round=1)
    # A retried trial: the replaced one keeps its grades, which nobody may count.
    retried = Trial.objects.filter(run=head, case__key="c2", attempt=2).get()
    retry = _copy(retried, attempt=3)
    Trial.objects.filter(pk=retried.pk).update(replaced_by=retry)
    # A case whose graded trial was retried into a pipeline error: neither the replaced
    # trial's grades nor those left on the errored retry count; the case still does.
    lone = Case.objects.create(suite=head.suite, key="c9", input="c9", tags=[])
    gone = _copy(retry, case=lone, attempt=1)
    gone_retry = _copy(gone, attempt=2, status="error")
    Trial.objects.filter(pk=gone.pk).update(replaced_by=gone_retry)

    for top in ("all", None, top_up.id):
        readable = Trial.objects.filter(run=head, replaced_by__isnull=True)
        if top is None:
            readable = readable.filter(top_up__isnull=True)
        elif top != "all":
            readable = readable.exclude(top_up=other)
        rows = run_rows_get(run=head, **({} if top == "all" else {"top_up": top}))
        assert sorted(t[0] for t in rows.trials) == sorted(readable.values_list("id", flat=True))
        ok = readable.filter(status="ok")
        assert sorted((g[0], g[1]) for g in rows.grades) == sorted(
            Grade.objects.filter(trial__in=ok).values_list("trial_id", "grader")
        )
        assert [c[2] for c in rows.cases] == sorted(
            set(readable.values_list("case__key", flat=True))
        )
        both = runs_rows_get(runs=[base, head], **({} if top == "all" else {"top_up": top}))
        # Grades come in no fixed order (no ORDER BY: every reader keys them by trial and
        # grader); on PostgreSQL the two-run read's plan returns them in another order.
        assert dataclasses.replace(both[head.id], grades=sorted(both[head.id].grades)) == (
            dataclasses.replace(rows, grades=sorted(rows.grades))
        )
    assert "c9" in [c[2] for c in run_rows_get(run=head).cases]  # its errored retry counts
    history = runs_rows_get(runs=[base, head], case_ids=[first.case_id], top_up=None)
    assert {c[2] for r in history.values() for c in r.cases} == {"c1"}
    assert {g[0] for g in history[head.id].grades} == set(
        Trial.objects.filter(run=head, case__key="c1", top_up__isnull=True).values_list(
            "id", flat=True
        )
    )
