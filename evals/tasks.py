"""Celery tasks for runs: thin wrappers that take ids and call one service.

Each task imports its service when it runs: the services enqueue these tasks, so a
top-level import would be a cycle.
"""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_chunk_execute(run_id: int, trial_ids: list[int]) -> None:
    """Execute one chunk of a run's trials; idempotent, safe under redelivery."""
    from evals.runner.execute import trial_chunk_execute  # noqa: PLC0415 - see module doc

    trial_chunk_execute(run_id=run_id, trial_ids=list(trial_ids))


@shared_task
def runs_sweep() -> dict:
    """Take back trials whose lease expired and stalled judge rungs (``evals.runner.sweeper``); run
    by Celery beat every ``ASSAY["SWEEP_SECONDS"]``. Returns the counts."""
    from evals.runner.sweeper import runs_sweep as sweep  # noqa: PLC0415 - see module doc

    return asdict(sweep())


@shared_task(acks_late=True, reject_on_worker_lost=True)
def top_up_advance(top_up_id: int) -> None:
    """Take a comparison's top-up one step (decide, end or add a round); idempotent."""
    from evals.comparison.topup import top_up_advance as advance  # noqa: PLC0415 - see module doc

    advance(top_up_id=top_up_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def adaptive_top_up_start(run_id: int) -> None:
    """Start the top-up of an adaptive run against its baseline; idempotent."""
    from evals.comparison.topup import adaptive_start  # noqa: PLC0415 - see module doc

    adaptive_start(run_id=run_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def experiment_settle_advance(experiment_id: int) -> None:
    """Take an experiment's racing one step (decide a look, add its round or end); idempotent."""
    from evals.experiments.racing import (  # noqa: PLC0415 - see module doc
        experiment_settle_advance as advance,
    )

    advance(experiment_id=experiment_id)
