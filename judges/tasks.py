"""Celery tasks of the judges app. Each imports its service when it runs: the services enqueue
these tasks, so a top-level import would be a cycle.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True)
def judge_run_execute(run_id: int, judge_version_id: int, trial_ids: list[int]) -> None:
    """Grade one chunk of a judge run; idempotent per (trial, judge version)."""
    from judges.runs import judge_run_execute as execute  # noqa: PLC0415 - see module doc

    execute(run_id=run_id, judge_version_id=judge_version_id, trial_ids=trial_ids)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def pairwise_judge_run_execute(judge_run_id: int, pair_ids: list[int]) -> None:
    """Judge one chunk of a pairwise judge run; idempotent per presentation."""
    from judges.runs import pairwise_judge_run_execute as execute  # noqa: PLC0415 - module doc

    execute(judge_run_id=judge_run_id, pair_ids=pair_ids)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_chunk_judge(run_id: int, trial_ids: list[int]) -> None:
    """The judge rung of one chunk of a run; idempotent per (trial, grader)."""
    from judges.grading import run_chunk_judge as judge  # noqa: PLC0415 - see module doc

    judge(run_id=run_id, trial_ids=trial_ids)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def probe_run_execute(probe_run_id: int) -> None:
    """Run one queued probe run; claimed by compare-and-set, so a redelivery does nothing."""
    from judges.probes import probe_run_execute as execute  # noqa: PLC0415 - see module doc

    execute(probe_run_id=probe_run_id)
