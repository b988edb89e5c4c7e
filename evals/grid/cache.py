"""Cache keys for the grid of runs' columns (``evals.grid.build``), one per finished run.

Why: a grid of 10 runs × 2,000 cases read every trial and grade of every run on each view
(60,000 trials and grades at 3 trials per case), most of the page's time, while a finished
run's column only changes when grades, trials or its grader set change later (a judge run
or an import of labels grading it after the fact, a top-up, a retry).

Invariant: a column's key holds everything the column depends on that can change: the
run's UUID and status; a digest of its stored grader set (``graders``, which a recorded
judge's grading can extend); its trials' count, largest id, finished, open (queued or
running) and replaced counts (a new trial, a retry, a top-up round or an in-flight trial
settling after a cancel moves one of them); its grades' count and largest id. Grades are
append-only (one per trial and grader, never updated by the application, deleted only
with their trial), so a new grade (a judge run or an import of labels grading the run
after it finished) moves the count and the largest id. A run that is not finished has no
key and is never cached. What depends on the viewer (blindness) is applied after the
cache, never stored in it; cases (keys, tags) are read fresh on every view.

The grades' query also says which graders graded each run (``grid_column_state``): the
column's reader needs it when the key misses (``evals.grid.cells.runs_gating_keys``).

Queries: two, whatever the number of runs, cases, trials and grades.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from django.db import models

from evals.models import Grade, Run, Trial

GRID_CACHE_SECONDS = 6 * 3600
# v2: a column holds no trial ids (blindness is read per view, evals.grid.build).
KEY_VERSION = "v2"
OPEN = (Trial.Status.QUEUED, Trial.Status.RUNNING)


def grid_column_keys(*, runs: Sequence[Run]) -> dict[int, str | None]:
    """Run id -> its column's cache key for each of ``runs`` (None for a run that is not
    finished: never cached). Two queries (``grid_column_state``)."""
    return grid_column_state(runs=runs)[0]


def grid_column_state(*, runs: Sequence[Run]) -> tuple[dict[int, str | None], dict[int, set[str]]]:
    """For each of ``runs``: run id -> its column's cache key (None for a run that is not
    finished: never cached), and run id -> the graders with a grade on any of its trials
    (read here because the same query counts the grades for the key; the column's reader
    needs to know whether a grader outside the run's grader set graded it). Two queries:
    the trials' counts per run, the grades' per run and grader."""
    ids = [r.id for r in runs]
    finished = models.Q(status__in=Trial.FINISHED)
    trials = {
        row["run_id"]: row
        for row in Trial.objects.filter(run_id__in=ids)
        .order_by()
        .values("run_id")
        .annotate(
            n=models.Count("id"),
            top=models.Max("id"),
            done=models.Count("id", filter=finished),
            open=models.Count("id", filter=models.Q(status__in=OPEN)),
            replaced=models.Count("replaced_by_id"),
        )
    }
    grades: dict[int, dict] = {r.id: {"n": 0, "top": None} for r in runs}
    graded: dict[int, set[str]] = {r.id: set() for r in runs}
    for run_id, grader, n, top in (
        Grade.objects.filter(trial__run_id__in=ids)
        .order_by()
        .values_list("trial__run_id", "grader")
        .annotate(n=models.Count("id"), top=models.Max("id"))
    ):
        mine = grades[run_id]
        mine["n"] += n
        mine["top"] = top if mine["top"] is None else max(mine["top"], top)
        graded[run_id].add(grader)
    keys: dict[int, str | None] = {}
    for run in runs:
        if not run.is_terminal:
            keys[run.id] = None
            continue
        t, g = trials.get(run.id, {}), grades[run.id]
        graders = hashlib.sha256(
            json.dumps(run.graders, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        keys[run.id] = (
            f"assay:grid-column:{KEY_VERSION}:{run.uuid}:{run.status}:{graders}:"
            f"{t.get('n', 0)}.{t.get('top')}.{t.get('done', 0)}.{t.get('open', 0)}."
            f"{t.get('replaced', 0)}:"
            f"{g['n']}.{g['top']}"
        )
    return keys, graded
