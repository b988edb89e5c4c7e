"""TODO docstring (evals.report.selectors)."""

from __future__ import annotations

import dataclasses

from django.db import models
from django.db.models import Case as CaseWhen
from django.db.models.fields.json import KT
from django.db.models.functions import Substr

from core.db import raw_rows
from evals.models import Case, Grade, Run, Trial
from evals.report.build import RunReport, RunRows, judge_calls_from_rows, report_from_rows
from judges.models import JudgeApproval

REASON_MAX_CHARS = 500


def run_report(*, run: Run) -> RunReport:
    """The run report (``evals.report.RunReport``): trial and error counts, pass rate with its
    clustered 95% interval, pass@k/pass^k, per-case rows, tag slices, grouped reasons,
    tokens, latency and cost, overall and per grader.

    Seven queries whatever the run's size (trials, grades, cases, one aggregate of token and
    cost totals, three grouped reason counts; plus one for ``run.suite`` unless it is joined),
    plus one for the active approvals of the judge versions that graded (the corrected pass
    rate of a trusted judge's grader, ``Figures.corrected``).
    Output text columns are never loaded; verdicts come back as small integers so no
    per-row converter runs. Rules in ``evals.report``.
    """
    # hoisted

    ok, err = Trial.Status.OK, Trial.Status.ERROR
    trials = Trial.objects.filter(run=run).order_by()
    grades = Grade.objects.filter(trial__run=run, trial__status=ok).order_by()
    finished = models.Q(status__in=[ok, err])
    short_reason = Substr("reason", 1, REASON_MAX_CHARS)
    code = CaseWhen(
        models.When(status=Grade.Status.ERROR, then=-1),
        models.When(passed=True, then=1),
        default=0,
        output_field=models.IntegerField(),
    )
    gating = CaseWhen(
        models.When(gating=True, then=1), default=0, output_field=models.IntegerField()
    )
    totals = trials.aggregate(
        finished=models.Count("id", filter=finished),
        input_sum=models.Sum("input_tokens", filter=finished),
        output_sum=models.Sum("output_tokens", filter=finished),
        input_unknown=models.Count("id", filter=finished & models.Q(input_tokens__isnull=True)),
        output_unknown=models.Count("id", filter=finished & models.Q(output_tokens__isnull=True)),
        cost=models.Sum("cost_usd", filter=finished),
        cost_unknown=models.Count("id", filter=finished & models.Q(cost_usd__isnull=True)),
    )
    grade_rows = raw_rows(
        grades.values_list("trial_id", "grader", code, "score", gating, "judge_version_id")
    )
    rows = RunRows(
        trials=raw_rows(trials.values_list("id", "case_id", "status", "latency_ms")),
        grades=grade_rows,
        cases=list(
            Case.objects.filter(id__in=trials.values("case_id"))
            .order_by("key", "id")
            .values_list("id", "uuid", "key", "tags")
        ),
        graders=run.grader_set.gating_pairs,
        totals=totals,
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
            trials.filter(status=err)
            .values_list(Substr("error_message", 1, REASON_MAX_CHARS))
            .annotate(n=models.Count("id"))
        ),
        approvals=_active_approvals({g[5] for g in grade_rows if g[5] is not None}),
    )
    # Judge calls apart from the target's (one query; JSON keys only, never the prompt).
    judge_calls = judge_calls_from_rows(
        list(
            grades.filter(judge_version__isnull=False).values_list(
                KT("details__input_tokens"),
                KT("details__output_tokens"),
                KT("details__cost_usd"),
                KT("details__skipped"),
            )
        )
    )
    return dataclasses.replace(report_from_rows(run=run, rows=rows), judge_calls=judge_calls)


def _active_approvals(version_ids: set[int]) -> dict[int, tuple[int, dict]]:
    """Judge version id -> (approval id, figures) of its active approval; one query, none
    when no judge graded the run."""
    if not version_ids:
        return {}
    # hoisted

    return {
        v: (a, figures)
        for a, v, figures in JudgeApproval.objects.filter(
            judge_version_id__in=version_ids,
            revoked_at__isnull=True,
        ).values_list("id", "judge_version_id", "figures")
    }
