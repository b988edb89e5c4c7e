"""Imports from the dashboard that run in the background, with a progress bar.

An upload over ``ASSAY["IMPORT_INLINE_BYTES"]`` is stored (``import_job_create``) and
imported by a Celery task (``import_job_execute``: ``results_import``, one transaction).
Nothing the open transaction writes is visible, and on SQLite it holds the write lock, so
progress (bytes read) goes to the ``progress`` cache, written by a thread watching the
file's position; the job's status and outcome are rows written before and after.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import OperationalError, transaction
from django.utils import timezone

from core.errors import DomainError
from core.outbox import outbox_enqueue
from core.roles import LEAD, user_has_role
from interop.importers import results_import
from interop.models import ImportJob

logger = logging.getLogger(__name__)

PROGRESS_SECONDS = 0.5  # how often the watcher thread writes the bytes read
PROGRESS_TTL = 24 * 3600


class DatabaseBusy(Exception):
    """The database stayed locked past its busy timeout (SQLite): the import was rolled back
    whole and may be tried again."""


@dataclass(frozen=True)
class ImportProgress:
    """``status``; ``percent`` of the file read (0-100, None before the task starts);
    ``bytes_read``, ``size_bytes``."""

    status: str
    percent: int | None
    bytes_read: int
    size_bytes: int


def _progress_key(job: ImportJob) -> str:
    return f"import-job:{job.uuid}:bytes"


def import_job_create(*, upload: Any, options: dict, user: Any) -> ImportJob:
    """Store ``upload`` and queue its import (after commit) with ``options`` (``{"suite", "run",
    "format", "mapping", "suite_kind", "threshold"}``); returns the job."""
    from interop.tasks import import_job_run  # noqa: PLC0415 - tasks import this module

    job = ImportJob(
        created_by=user if getattr(user, "is_authenticated", False) else None,
        filename=(upload.name or "upload")[:255],
        size_bytes=upload.size or 0,
        options=options,
    )
    job.file.save(os.path.basename(job.filename) or "upload", upload, save=False)
    job.save()
    outbox_enqueue(import_job_run, job.id, subject=f"interop.import_job:{job.id}")
    return job


def import_jobs_sweep(*, now=None) -> int:
    """Queue again the jobs ``running`` longer than Celery's hard time limit plus a minute: no
    live worker can hold them, and one transaction means nothing was written. Returns how many.
    Runs under Celery beat."""
    now = now or timezone.now()
    limit = getattr(settings, "CELERY_TASK_TIME_LIMIT", 30 * 60) or 30 * 60
    stale_before = now - timedelta(seconds=limit + 60)
    ids = list(
        ImportJob.objects.filter(
            status=ImportJob.Status.RUNNING, started_at__lt=stale_before
        ).values_list("id", flat=True)
    )
    from interop.tasks import import_job_run  # noqa: PLC0415 - tasks import this module

    requeued = 0
    for job_id in ids:
        with transaction.atomic():
            if ImportJob.objects.filter(
                id=job_id, status=ImportJob.Status.RUNNING, started_at__lt=stale_before
            ).update(status=ImportJob.Status.QUEUED, started_at=None):
                outbox_enqueue(import_job_run, job_id, subject=f"interop.import_job:{job_id}")
                requeued += 1
    if requeued:
        logger.warning("import jobs: %d left running by a dead worker queued again", requeued)
    return requeued


def import_job_execute(*, job_id: int) -> None:
    """Import job ``job_id`` if still queued (compare-and-set), end it ``succeeded`` or
    ``failed`` (a ``DomainError``'s sentence, field and record) and delete the upload. Raises
    ``DatabaseBusy`` (the job queued again) so the task can retry."""
    claimed = ImportJob.objects.filter(id=job_id, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return
    job = ImportJob.objects.select_related("created_by").get(id=job_id)
    options = job.options
    stop = threading.Event()
    try:
        with job.file.open("rb") as stored:
            stream = getattr(stored, "file", stored)  # the real file object under Django's
            watcher = _progress_watch(job, stream, stop)
            try:
                summary = results_import(
                    stream=stream,
                    filename=job.filename,
                    suite_name=options.get("suite", ""),
                    run_name=options.get("run", ""),
                    fmt=options.get("format") or None,
                    mapping=options.get("mapping") or {},
                    suite_kind=options.get("suite_kind") or "regression",
                    threshold=options.get("threshold"),
                    user=job.created_by,
                )
            finally:
                stop.set()
                watcher.join()
    except DomainError as error:
        _job_end(job, status=ImportJob.Status.FAILED, error=error)
    except FileNotFoundError as error:
        # The upload is in the web server's storage, not one this worker reads.
        missing = DomainError(
            "the uploaded file is not where the worker looks for it: web server and workers "
            "need a shared default storage (MEDIA_ROOT)",
            field="file",
        )
        _job_end(job, status=ImportJob.Status.FAILED, error=missing)
        logger.error("import job %s: %s", job.uuid, error)
    except OperationalError as error:
        if "locked" not in str(error).lower():
            raise
        ImportJob.objects.filter(id=job.id).update(status=ImportJob.Status.QUEUED)
        raise DatabaseBusy(str(error)) from error
    else:
        _job_end(job, status=ImportJob.Status.SUCCEEDED, summary=summary)


def _job_end(job: ImportJob, *, status: str, summary=None, error: DomainError | None = None):
    job.status = status
    job.finished_at = timezone.now()
    if summary is not None:
        job.summary = summary.as_json()
        job.run = summary.runs[0] if summary.runs else None
    if error is not None:
        job.error = f"Nothing was imported. {error}"
        job.error_field = (error.field or "")[:200]
        job.error_record = "" if error.record is None else str(error.record)[:200]
    stored = job.file.name
    job.file = ""
    job.save()
    if stored:
        job.file.storage.delete(stored)
    caches["progress"].set(_progress_key(job), job.size_bytes, PROGRESS_TTL)


def _progress_watch(job: ImportJob, stream, stop: threading.Event) -> threading.Thread:
    """A thread writing ``stream``'s OS file position to the progress cache every
    ``PROGRESS_SECONDS`` until ``stop``: no cooperation from the importer needed."""
    cache, key = caches["progress"], _progress_key(job)
    fd = stream.fileno()

    def watch() -> None:
        while True:
            try:
                cache.set(key, os.lseek(fd, 0, os.SEEK_CUR), PROGRESS_TTL)
            except OSError:  # the file was closed: the import is over
                return
            except Exception:  # noqa: BLE001 - progress is a nicety; never fail the import
                logger.exception("import progress not written")
            if stop.wait(PROGRESS_SECONDS):
                return

    thread = threading.Thread(target=watch, name=f"import-progress-{job.id}", daemon=True)
    thread.start()
    return thread


def import_job_progress(*, job: ImportJob) -> ImportProgress:
    """The job's progress for its page (``ImportProgress``): 100% once succeeded."""
    if job.status == ImportJob.Status.QUEUED:
        return ImportProgress(job.status, None, 0, job.size_bytes)
    read = caches["progress"].get(_progress_key(job)) or 0
    if job.status == ImportJob.Status.SUCCEEDED:
        read = job.size_bytes
    read = min(int(read), job.size_bytes)
    percent = 100 if not job.size_bytes else int(100 * read / job.size_bytes)
    return ImportProgress(job.status, percent, read, job.size_bytes)


def import_job_get(*, job_uuid, user) -> ImportJob:
    """Job ``job_uuid`` if ``user`` created it or leads; else ``DomainError`` (``not_found``)."""
    job = ImportJob.objects.select_related("run").filter(uuid=job_uuid).first()
    if job is None or (job.created_by_id != user.id and not user_has_role(user, LEAD)):
        raise DomainError("no such import", field="job", code="not_found")
    return job
