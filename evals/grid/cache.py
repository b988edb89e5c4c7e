"""Cache keys for the grid of runs' columns (``evals.grid.build``), one per finished run.

Why: a grid of 10 runs × 2,000 cases read every trial and grade of every run on each view
(60,000 trials and grades at 3 trials per case), most of the page's time, while a finished
run's column only changes when its trials, grades, status or grader set change later (a
judge run or an import of labels grading it after the fact, a top-up, a retry, a grade
regraded in place).

Invariant: a column's key is the run's UUID and its fingerprint
(``evals.fingerprint.run_fingerprints``), which moves with every such change, a regrade in
place included. A run that is not finished has no key and is never cached. What depends
on the viewer (blindness) is applied after the cache, never stored in it; cases (keys,
tags) are read fresh on every view.

The fingerprint's query also says which graders graded each run (``grid_column_state``):
the column's reader needs it when the key misses (``evals.grid.cells.runs_gating_keys``).

Queries: one, whatever the number of runs, cases, trials and grades.
"""

from __future__ import annotations

from collections.abc import Sequence

from evals.fingerprint import run_fingerprints
from evals.models import Run

GRID_CACHE_SECONDS = 6 * 3600
# v3: the key is the run's fingerprint (evals.fingerprint), which sees regrades in place.
KEY_VERSION = "v3"


def grid_column_keys(*, runs: Sequence[Run]) -> dict[int, str | None]:
    """Run id -> its column's cache key for each of ``runs`` (None for a run that is not
    finished: never cached). One query (``grid_column_state``)."""
    return grid_column_state(runs=runs)[0]


def grid_column_state(
    *, runs: Sequence[Run]
) -> tuple[dict[int, str | None], dict[int, frozenset[str]]]:
    """For each of ``runs``: run id -> its column's cache key (None for a run that is not
    finished: never cached), and run id -> the graders with a grade on any of its trials
    (the column's reader needs to know whether a grader outside the run's grader set
    graded it). One query (``evals.fingerprint.run_fingerprints``)."""
    prints = run_fingerprints(runs=runs)
    keys: dict[int, str | None] = {}
    for run in runs:
        key = prints[run.id].key
        keys[run.id] = None if key is None else f"assay:grid-column:{KEY_VERSION}:{run.uuid}:{key}"
    return keys, {run.id: prints[run.id].graded for run in runs}
