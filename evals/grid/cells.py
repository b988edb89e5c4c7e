"""The grid's cells counted in the database: each case's overall verdicts in each of many runs,
without reading a row per trial or per grade (``runs_case_counts``).

The database joins each readable trial to its grade of each gating grader and counts trials
sharing a case, a status and codes: a few rows per cell (reading every trial was more than
half of a 10 runs × 2,000 cases grid's first view). The SQL only classifies, with the run
loader's own expressions (``STATUS_CODES``, ``grade_code``); the verdict and the tally are
the run report's functions (``overall_codes``, ``case_tally``) over the grouped rows.
Tests hold the counts equal to ``overall_codes_from_rows``."""

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
    """One run's ``case_ids`` ascending, the overall ``tally`` and ``trials`` per case."""

    case_ids: np.ndarray
    tally: CaseTally
    trials: np.ndarray


def runs_case_counts(
    *, runs: Sequence[Run], gating: Mapping[int, Sequence[str]]
) -> dict[int, RunCaseCounts]:
    """Run id -> ``RunCaseCounts`` for ``runs``, verdicts decided by ``gating[run.id]``. One
    ``UNION ALL`` query whatever the number of runs, cases, trials and grades."""
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
    """Run id -> the graders deciding its verdicts (``gating_keys``), given ``graded``: run id ->
    the graders with a grade on it. One query when graders outside a set graded, else none."""
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
    """``(run_id, case_id, status, code per key..., count)`` rows, codes padded to ``width``."""
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
    """``RunCaseCounts`` from one run's rows (the first ``n_gating`` codes are its gates)."""
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
