"""Baselines: the run a suite's new runs are compared with. Setting one adds a row (who set
which, when); the current baseline is the latest row."""

from __future__ import annotations

from core.errors import DomainError
from evals.models import Baseline, Grade, Run, Suite


def baseline_set(*, suite: Suite, run: Run, by=None, note: str = "") -> Baseline:
    """Make ``run`` the current baseline of ``suite`` (a new ``Baseline`` row). Raises
    ``DomainError`` naming the field: ``run`` must be of ``suite`` and pass ``baseline_refusal``;
    ``note`` at most 500 characters."""
    if run.suite_id != suite.id:
        raise DomainError(f"{run.name!r} belongs to another suite, not {suite.name!r}", field="run")
    refusal = baseline_refusal(run=run)
    if refusal:
        raise DomainError(detail=refusal, field="run")
    if len(note) > 500:
        raise DomainError("at most 500 characters", field="note")
    user = by if by is not None and getattr(by, "is_authenticated", False) else None
    return Baseline.objects.create(suite=suite, run=run, set_by=user, note=note)


def baseline_current(*, suite: Suite) -> Baseline | None:
    """The suite's current baseline (its latest row, joined) or None. One query."""
    return (
        Baseline.objects.filter(suite=suite)
        .select_related("run__suite", "set_by")
        .order_by("-set_at", "-id")
        .first()
    )


def baseline_refusal(*, run: Run) -> str | None:
    """Why ``run`` cannot be a baseline, or None: it must be succeeded or failed (a cancelled run
    measured part of its suite) with at least one successful grade (else the gate has nothing
    to compare). One query when the status allows."""
    if not run.is_terminal:
        return f"run: {run.name!r} is {run.status}; only a finished run can be a baseline"
    if run.status == Run.Status.CANCELLED:
        return f"run: {run.name!r} was cancelled; a cancelled run cannot be a baseline"
    if not Grade.objects.filter(trial__run=run, status=Grade.Status.OK).exists():
        return f"run: {run.name!r} has no graded trial; it cannot be a baseline"
    return None


def run_baseline_context(*, run: Run) -> dict:
    """For the run page: ``baseline`` (current or None), ``other_runs`` (at most ``HISTORY_RUNS``,
    newest first) and ``baseline_refusal``. Up to three queries."""
    baseline = baseline_current(suite=run.suite)
    other_runs = list(
        Run.objects.filter(suite_id=run.suite_id)
        .exclude(id=run.id)
        .only("id", "uuid", "name", "created_at")
        .order_by("-created_at", "-id")[:HISTORY_RUNS]
    )
    return {
        "baseline": baseline,
        "other_runs": other_runs,
        "baseline_refusal": baseline_refusal(run=run),
    }


HISTORY_RUNS = 50
