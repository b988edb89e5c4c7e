"""The run report read: the one run loader (``evals.report.rows.run_rows_get``) plus the
grouped reasons and the judge calls, assembled by ``evals.report.build``."""

from __future__ import annotations

import dataclasses

from django.db import models
from django.db.models.functions import Substr

from core.gc_pause import gc_paused_call
from evals.grading.contract.decisions import run_decisions
from evals.grading.rungs import judge_rung
from evals.models import Grade, Run, Trial
from evals.report.agents import agent_reasons_add, agent_report
from evals.report.build import ReasonRows, RunReport, report_from_rows
from evals.report.costs import runs_cost_classes
from evals.report.rows import run_rows_get

REASON_MAX_CHARS = 500


@gc_paused_call
def run_report(*, run: Run) -> RunReport:
    """The run report (``evals.report.build.RunReport``; rules there).

    Ten queries whatever the run's size (eleven when judges graded), plus one for ``run.suite``
    unless joined, three for a contract grader's decisions and one for agent disagreements."""
    grades = Grade.objects.filter(trial__run=run, trial__status=Trial.Status.OK).order_by()
    short_reason = Substr("reason", 1, REASON_MAX_CHARS)
    reasons = ReasonRows(
        failure_groups=list(
            grades.filter(status=Grade.Status.OK, passed=False)
            .values_list("grader", short_reason)
            .annotate(n=models.Count("id"))
        ),
        error_groups=list(
            grades.filter(status=Grade.Status.ERROR)
            .values_list("grader", short_reason)
            .annotate(n=models.Count("id"))
        ),
        pipeline_groups=list(
            Trial.objects.filter(run=run, status=Trial.Status.ERROR)
            .order_by()
            .values_list(Substr("error_message", 1, REASON_MAX_CHARS))
            .annotate(n=models.Count("id"))
        ),
    )
    # Judge calls apart from the target's, from the call ledger: every call paid, including
    # one whose grade lost a race (one query; none without a judge rung registered).
    rung = judge_rung()
    judge_calls = None if rung is None else rung.run_spend(run_id=run.id)
    rows = run_rows_get(run=run, usage="totals")
    cost_classes = runs_cost_classes(runs=[run])[run.id]
    report = report_from_rows(run=run, rows=rows, reasons=reasons, cost_classes=cost_classes)
    agents = agent_report(run=run, rows=rows, k_max=len(report.overall.pass_k))
    retried = Trial.objects.filter(run=run, replaced_by__isnull=False).count()
    decisions = run_decisions(run=run)
    return dataclasses.replace(
        report,
        judge_calls=judge_calls,
        decisions=decisions.as_json() if decisions.graded else None,
        agents=None if agents is None else agent_reasons_add(run=run, report=agents).as_json(),
        trials=dataclasses.replace(report.trials, retried=retried),
    )


def run_report_state(*, run: Run) -> str:
    """A short text that changes whenever the live report of ``run`` may have: its finished and
    errored counts and the largest id of its trials' grades (a grade is never rewritten in
    place while the run is live; a regrade writes a new row). The progress poll sends the pass
    rate card again only when it changed. One query."""
    last_grade = Grade.objects.filter(trial__run=run).aggregate(m=models.Max("id"))["m"]
    return f"{run.trials_finished}.{run.trials_errored}.{last_grade or 0}"
