"""Imports from the dashboard that run in the background, with a progress bar.

An upload over ``ASSAY["IMPORT_INLINE_BYTES"]`` is stored (``import_job_create``) and
imported by a Celery task (``import_job_execute``: ``results_import``, one transaction).
Nothing the open transaction writes is visible, and on SQLite it holds the write lock, so
progress (bytes read) goes to the ``progress`` cache, written by a thread watching the
file's position; the job's status and outcome are rows written before and after.

A running job holds a lease, as a run's trials do (``ASSAY_TRIAL_LEASE_SECONDS``): the
watcher thread renews it in the ``progress`` cache every ``PROGRESS_SECONDS`` (the open
transaction keeps it out of the database), and the sweep (``import_jobs_sweep``, every
``ASSAY_SWEEP_SECONDS`` under Celery beat) queues again a job whose lease ran out: a killed
worker's import starts again within a lease and a sweep. The claim's ``started_at`` fences
it: the import's rows and the job's end commit together only while the job is still that
claim's, so an import taken back from a worker that was only slow rolls back whole and every
row is written once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
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


class LeaseLost(Exception):
    """The job was taken back (its lease ran out) while this worker imported it: the import
    was rolled back whole; the worker that holds it now imports it."""


def import_lease_seconds() -> float:
    """A running job's lease, in seconds: ``ASSAY["TRIAL_LEASE_SECONDS"]`` (60)."""
    return float(settings.ASSAY["TRIAL_LEASE_SECONDS"])


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


def _lease_key(job: ImportJob) -> str:
    return f"import-job:{job.uuid}:lease"


def _lease_expiry(job: ImportJob, now: float) -> float:
    """When ``job``'s lease runs out, in epoch seconds: as last renewed in the cache, else (no
    renewal seen: the cache lost it, or the worker died first) a lease after its start."""
    renewed = caches["progress"].get(_lease_key(job))
    if isinstance(renewed, int | float):
        return float(renewed)
    started = job.started_at.timestamp() if job.started_at else now
    return started + import_lease_seconds()


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


def import_jobs_sweep(*, now: float | None = None) -> int:
    """Queue again the jobs ``running`` whose lease ran out (module docstring; ``now``: epoch
    seconds): their worker died or lost the cache, and one transaction means nothing was
    written. A compare-and-set on the claim's ``started_at``. Returns how many. Runs under
    Celery beat."""
    now = time.time() if now is None else now
    running = ImportJob.objects.filter(status=ImportJob.Status.RUNNING).only(
        "id", "uuid", "started_at"
    )
    expired = [job for job in running if _lease_expiry(job, now) < now]
    from interop.tasks import import_job_run  # noqa: PLC0415 - tasks import this module

    requeued = 0
    for job in expired:
        with transaction.atomic():
            if ImportJob.objects.filter(
                id=job.id, status=ImportJob.Status.RUNNING, started_at=job.started_at
            ).update(status=ImportJob.Status.QUEUED, started_at=None):
                outbox_enqueue(import_job_run, job.id, subject=f"interop.import_job:{job.id}")
                requeued += 1
    if requeued:
        logger.warning("import jobs: %d whose lease ran out queued again", requeued)
    return requeued


def import_job_execute(*, job_id: int) -> None:
    """Import job ``job_id`` if still queued (compare-and-set, holding a lease: module
    docstring), end it ``succeeded`` (in the import's transaction, while the claim holds) or
    ``failed`` (a ``DomainError``'s sentence, field and record) and delete the upload. Raises
    ``DatabaseBusy`` (the job queued again) so the task can retry; a job taken back meanwhile
    is rolled back and left to its new worker (logged)."""
    started_at = timezone.now()
    claimed = ImportJob.objects.filter(id=job_id, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.RUNNING, started_at=started_at
    )
    if not claimed:
        return
    job = ImportJob.objects.select_related("created_by").get(id=job_id)
    caches["progress"].set(_lease_key(job), time.time() + import_lease_seconds(), PROGRESS_TTL)
    options = job.options
    stop = threading.Event()
    try:
        with job.file.open("rb") as stored, transaction.atomic():
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
            _job_succeeded(job, started_at=started_at, summary=summary)
    except LeaseLost:
        logger.warning("import job %s: taken back while importing; rolled back", job.uuid)
    except DomainError as error:
        _job_failed(job, started_at=started_at, error=error)
    except FileNotFoundError as error:
        # The upload is in the web server's storage, not one this worker reads.
        missing = DomainError(
            "the uploaded file is not where the worker looks for it: web server and workers "
            "need a shared default storage (MEDIA_ROOT)",
            field="file",
        )
        _job_failed(job, started_at=started_at, error=missing)
        logger.error("import job %s: %s", job.uuid, error)
    except OperationalError as error:
        if "locked" not in str(error).lower():
            raise
        ImportJob.objects.filter(
            id=job.id, status=ImportJob.Status.RUNNING, started_at=started_at
        ).update(status=ImportJob.Status.QUEUED)
        raise DatabaseBusy(str(error)) from error
    else:
        _upload_forget(job)


def _job_succeeded(job: ImportJob, *, started_at, summary) -> None:
    """End ``job`` succeeded in the import's transaction while the claim of ``started_at``
    holds; else raise ``LeaseLost`` (which rolls the import back)."""
    job.status = ImportJob.Status.SUCCEEDED
    job.finished_at = timezone.now()
    job.summary = summary.as_json()
    job.run = summary.runs[0] if summary.runs else None
    kept = ImportJob.objects.filter(
        id=job.id, status=ImportJob.Status.RUNNING, started_at=started_at
    ).update(
        status=job.status,
        finished_at=job.finished_at,
        summary=job.summary,
        run=job.run,
        file="",
    )
    if not kept:
        raise LeaseLost(str(job.uuid))


def _upload_forget(job: ImportJob) -> None:
    """After the job ended: delete its stored upload, show its progress whole, drop its
    lease."""
    stored = job.file.name
    job.file = ""
    if stored:
        job.file.storage.delete(stored)
    caches["progress"].set(_progress_key(job), job.size_bytes, PROGRESS_TTL)
    caches["progress"].delete(_lease_key(job))


def _job_failed(job: ImportJob, *, started_at, error: DomainError) -> None:
    """End ``job`` failed with ``error``'s sentence, field and record while the claim of
    ``started_at`` holds (else leave it to the worker that holds it now)."""
    failed = ImportJob.objects.filter(
        id=job.id, status=ImportJob.Status.RUNNING, started_at=started_at
    ).update(
        status=ImportJob.Status.FAILED,
        finished_at=timezone.now(),
        error=f"Nothing was imported. {error}",
        error_field=(error.field or "")[:200],
        error_record="" if error.record is None else str(error.record)[:200],
        file="",
    )
    if failed:
        _upload_forget(job)


def _progress_watch(job: ImportJob, stream, stop: threading.Event) -> threading.Thread:
    """A thread writing ``stream``'s OS file position to the progress cache and renewing the
    job's lease there every ``PROGRESS_SECONDS`` until ``stop``: no cooperation from the
    importer needed."""
    cache, key, lease_key = caches["progress"], _progress_key(job), _lease_key(job)
    fd = stream.fileno()

    def watch() -> None:
        while True:
            try:
                position = os.lseek(fd, 0, os.SEEK_CUR)
                expiry = time.time() + import_lease_seconds()
                cache.set_many({key: position, lease_key: expiry}, PROGRESS_TTL)
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
