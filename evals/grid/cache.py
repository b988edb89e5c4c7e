"""Cache keys for the grid of runs' columns (``evals.grid.build``), one per finished run.

A finished run's column changes only when its trials, grades, status or grader set do (a
later judge run, labels import, top-up, retry or regrade), so it is cached under the run's
UUID and fingerprint (``evals.fingerprint``). A run not finished is never cached; blindness
and cases are applied fresh on every view. One query whatever the size."""

from __future__ import annotations

from collections.abc import Sequence

from evals.fingerprint import run_fingerprints
from evals.models import Run

GRID_CACHE_SECONDS = 6 * 3600
# v3: the key is the run's fingerprint (evals.fingerprint), which sees regrades in place.
KEY_VERSION = "v3"


def grid_column_keys(*, runs: Sequence[Run]) -> dict[int, str | None]:
    """Run id -> its column's cache key (None when not finished). One query."""
    return grid_column_state(runs=runs)[0]


def grid_column_state(
    *, runs: Sequence[Run]
) -> tuple[dict[int, str | None], dict[int, frozenset[str]]]:
    """Run id -> column cache key (None when not finished), and run id -> graders that graded it."""
    prints = run_fingerprints(runs=runs)
    keys: dict[int, str | None] = {}
    for run in runs:
        key = prints[run.id].key
        keys[run.id] = None if key is None else f"assay:grid-column:{KEY_VERSION}:{run.uuid}:{key}"
    return keys, {run.id: prints[run.id].graded for run in runs}
