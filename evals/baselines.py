"""Baselines: the run a suite's new runs are compared with. Setting one adds a row (the
history of who set which baseline, when, is kept); the current baseline is the latest row.
A run can be a baseline once it finished, not cancelled, with at least one graded trial."""

from __future__ import annotations

from core.errors import DomainError
from evals.models import Baseline, Grade, Run, Suite


def baseline_set(*, suite: Suite, run: Run, by=None, note: str = "") -> Baseline:
    """Make ``run`` the current baseline of ``suite``: a new ``Baseline`` row, so the history
    of who set which baseline and when is kept (the latest row is current).

    Raises ``DomainError`` naming the field: ``run`` must belong to ``suite`` and pass
    ``baseline_refusal`` (finished, not cancelled, at least one graded trial); ``note`` at
    most 500 characters.
    """
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
    """The suite's current baseline (its latest ``Baseline`` row; run, run's suite and
    set_by joined), or None when none was ever set. One query."""
    return (
        Baseline.objects.filter(suite=suite)
        .select_related("run__suite", "set_by")
        .order_by("-set_at", "-id")
        .first()
    )


def baseline_refusal(*, run: Run) -> str | None:
    """Why ``run`` cannot be a baseline, or None when it can: it must be finished
    (succeeded or failed, not cancelled: a cancelled run measured only part of its suite)
    and hold at least one trial with a successful grade (a run with nothing graded gives
    the gate nothing to compare against). One query when the status allows."""
    if not run.is_terminal:
        return f"run: {run.name!r} is {run.status}; only a finished run can be a baseline"
    if run.status == Run.Status.CANCELLED:
        return f"run: {run.name!r} was cancelled; a cancelled run cannot be a baseline"
    if not Grade.objects.filter(trial__run=run, status=Grade.Status.OK).exists():
        return f"run: {run.name!r} has no graded trial; it cannot be a baseline"
    return None


def run_baseline_context(*, run: Run) -> dict:
    """For the run page: ``baseline`` (``evals.baselines.baseline_current``: the suite's
    current ``Baseline`` or None), ``other_runs`` (the suite's other runs, newest first, at most
    ``HISTORY_RUNS``: id, uuid, name, created_at only) to compare with, and
    ``baseline_refusal`` (why this run cannot be a baseline, or None). Up to three queries."""
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
