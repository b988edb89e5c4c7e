"""The grid's cells counted in the database: each case's overall verdicts in each of many
runs, without reading a row per trial or per grade (``runs_case_counts``).

Why: the grid of 10 runs × 2,000 cases read ~60,000 trials and ~58,000 grades into Python
on a first view (``evals.report.rows.runs_rows_get``), more than half of its time. Here
the database joins each readable trial to its grade of each gating grader (at most one:
grades are unique per trial and grader) and counts the trials sharing a case, a status
and a code per gating grader: a few rows per cell, whatever the number of trials.

The rule stays defined once: the SQL only classifies (the trial's status by
``evals.report.build.STATUS_CODES``, each grade by ``evals.report.rows.grade_code``, the
run loader's own expression) and counts; which graders gate is
``evals.grading.verdict.gating_keys`` (``runs_gating_keys``); each group's overall verdict is
``evals.grading.verdict.overall_codes`` and each case's counts ``case_tally``, the run
report's functions, applied to the groups repeated by their counts. Tests check that the
counts equal ``overall_codes_from_rows`` over the run loader's rows on generated runs.

Trials read: those of ``evals.report.rows.runs_rows_get`` (every trial not retried, top-ups
included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from django.db import models

from core.db import raw_rows
from evals.grading.verdict import (
    MISSING,
    PENDING,
    CaseTally,
    case_tally,
    gating_keys,
    overall_codes,
)
from evals.models import Grade, Run, Trial
from evals.report.build import STATUS_CODES
from evals.report.rows import GATING, grade_code


@dataclass(frozen=True)
class RunCaseCounts:
    """One run's cases: ``case_ids`` (ascending), the overall ``tally`` per case (same
    order, ``evals.grading.verdict.CaseTally``) and ``trials`` per case (every trial read,
    pending ones too)."""

    case_ids: np.ndarray
    tally: CaseTally
    trials: np.ndarray


def runs_case_counts(
    *, runs: Sequence[Run], gating: Mapping[int, Sequence[str]]
) -> dict[int, RunCaseCounts]:
    """Run id -> ``RunCaseCounts`` for each of ``runs``, whose overall verdicts are decided
    by the graders ``gating[run.id]`` (``runs_gating_keys``; empty: no trial has a
    verdict). One query whatever the number of runs, cases, trials and grades
    (runs sharing their gating graders are read by one SELECT, the others joined to it by
    UNION ALL); returns one row per case, status and grade codes."""
    if not runs:
        return {}
    by_keys: dict[tuple[str, ...], list[int]] = {}
    for run in runs:
        by_keys.setdefault(tuple(gating[run.id]), []).append(run.id)
    width = max(len(k) for k in by_keys)
    selects = [_counts_select(keys, run_ids, width) for keys, run_ids in by_keys.items()]
    query = selects[0].union(*selects[1:], all=True) if len(selects) > 1 else selects[0]
    rows = np.array(raw_rows(query), dtype=np.int64).reshape(-1, width + 4)
    return {run.id: _run_counts(rows[rows[:, 0] == run.id], len(gating[run.id])) for run in runs}


def runs_gating_keys(
    *, runs: Sequence[Run], graded: Mapping[int, Iterable[str]]
) -> dict[int, list[str]]:
    """Run id -> the graders deciding its overall verdicts
    (``evals.grading.verdict.gating_keys``) for each of ``runs``, given ``graded``: run id
    -> the graders with a grade on any of its trials (``evals.grid.cache.grid_column_state``
    reads them). A grader outside a run's grader set gates when one of its grades on the
    run's readable ok trials says so: one query for the runs such graders graded, none when
    there are none (the usual case)."""
    outside = {
        r.id: set(graded.get(r.id, ())) - {k for k, _ in r.grader_set.gating_pairs} for r in runs
    }
    seen: dict[int, dict[str, bool]] = {r.id: {} for r in runs}
    if any(outside.values()):
        for run_id, grader, gates in (
            Grade.objects.filter(
                trial__run_id__in=[i for i, keys in outside.items() if keys],
                trial__status=Trial.Status.OK,
                trial__replaced_by__isnull=True,
            )
            .order_by()
            .values_list("trial__run_id", "grader")
            .annotate(gates=models.Max(GATING))
        ):
            if grader in outside[run_id]:
                seen[run_id][grader] = bool(gates)
    return {r.id: gating_keys(r.grader_set.gating_pairs, seen[r.id]) for r in runs}


def _counts_select(keys: tuple[str, ...], run_ids: list[int], width: int) -> models.QuerySet:
    """``(run_id, case_id, status code, grade code of keys[0], ..., count)`` over the
    readable trials of ``run_ids``, grade codes padded with ``MISSING`` to ``width``."""
    trials = Trial.objects.filter(run_id__in=run_ids, replaced_by__isnull=True).order_by()
    grades = {
        f"g{i}": models.FilteredRelation("grades", condition=models.Q(grades__grader=key))
        for i, key in enumerate(keys)
    }
    codes = {
        f"c{i}": grade_code(f"g{i}") if i < len(keys) else models.Value(MISSING)
        for i in range(width)
    }
    status = models.Case(
        *(models.When(status=s, then=code) for s, code in STATUS_CODES.items()),
        default=PENDING,
        output_field=models.IntegerField(),
    )
    return (
        trials.annotate(**grades)
        .values("run_id", "case_id")
        .annotate(code=status, **codes)
        .annotate(n=models.Count("id"))
    )


def _run_counts(rows: np.ndarray, n_gating: int) -> RunCaseCounts:
    """``RunCaseCounts`` from one run's rows of ``runs_case_counts`` (the first ``n_gating``
    grade codes are its gating graders')."""
    case_ids, case_idx = np.unique(rows[:, 1], return_inverse=True)
    counts = rows[:, -1]
    trial_case = np.repeat(case_idx, counts)
    trial_codes = np.repeat(rows[:, 2], counts)
    gating_codes = [np.repeat(rows[:, 3 + i], counts) for i in range(n_gating)]
    overall = overall_codes(gating_codes, trial_codes)
    return RunCaseCounts(
        case_ids=case_ids,
        tally=case_tally(overall, trial_case, len(case_ids)),
        trials=np.bincount(trial_case, minlength=len(case_ids)),
    )
