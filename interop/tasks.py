"""Celery tasks of the border: a dashboard import in the background, and the sweep that
queues again an import a dead worker left running."""

from __future__ import annotations

from celery import shared_task

from interop.import_jobs import DatabaseBusy, import_job_execute, import_jobs_sweep


@shared_task(autoretry_for=(DatabaseBusy,), retry_backoff=5, retry_backoff_max=60, max_retries=20)
def import_job_run(job_id: int) -> None:
    """Import one queued upload (``interop.import_jobs.import_job_execute``); a database
    locked past its busy timeout rolls the import back and retries it with backoff."""
    import_job_execute(job_id=job_id)


@shared_task
def import_jobs_requeue() -> int:
    """Celery beat: queue again the import jobs a dead worker left running
    (``interop.import_jobs.import_jobs_sweep``)."""
    return import_jobs_sweep()
