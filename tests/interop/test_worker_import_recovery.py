"""A background import whose worker is killed with SIGKILL mid-import is taken back within
about a lease and a sweep (interop.import_jobs: the job's lease, renewed in the progress
cache), not Celery's 30-minute hard time limit, and imported once: one run, every row
written once. A real Celery worker, killed; a second one takes the job over."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile

from config.celery import app
from evals.models import Run, Suite, Trial
from interop.import_jobs import _progress_key, import_job_create, import_jobs_sweep
from interop.models import ImportJob
from tests.evals.test_worker import _worker_log, worker_factory, worker_queue
from tests.evals.worker_runs import rescue_worker

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

__all__ = ["worker_factory", "worker_queue"]  # fixtures, used by name

ROWS = 12_000
LEASE_S = 3


def _csv(rows: int) -> bytes:
    lines = ["case_id,input,output,passed"]
    lines += [f"c{i},question {i},answer {i},{'true' if i % 3 else 'false'}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def _job_wait(job: ImportJob, done, tmp_path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, (job.status, _worker_log(tmp_path))
        time.sleep(0.05)
        job.refresh_from_db()


def test_a_killed_workers_import_is_taken_back_after_its_lease_and_imported_once(
    worker_factory, worker_queue, tmp_path, settings, carol
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_LEASE_SECONDS": LEASE_S}
    env = {"ASSAY_TRIAL_LEASE_SECONDS": str(LEASE_S)}
    victim = worker_factory(env=env)
    data = _csv(ROWS)
    upload = SimpleUploadedFile("big.csv", data)
    options = {"suite": "S", "run": "R", "format": "", "mapping": {}, "suite_kind": "regression"}
    job = import_job_create(upload=upload, options=options, user=carol)

    def reading() -> bool:  # running, and a part of the file read
        read = caches["progress"].get(_progress_key(job)) or 0
        return job.status == ImportJob.Status.RUNNING and 0 < read < len(data)

    _job_wait(job, reading, tmp_path, timeout=30)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    killed_at = time.monotonic()
    job.refresh_from_db()
    assert job.status == ImportJob.Status.RUNNING
    assert Run.objects.count() == 0  # one transaction: nothing of it written

    with rescue_worker(worker_queue, tmp_path, env) as rescue_queue:
        app.conf.task_default_queue = rescue_queue  # restored by the worker_queue fixture
        requeued_after = None
        deadline = time.monotonic() + 40
        while not job.is_terminal:
            assert time.monotonic() < deadline, (job.status, _worker_log(tmp_path))
            if import_jobs_sweep() and requeued_after is None:  # what beat runs
                requeued_after = time.monotonic() - killed_at
            time.sleep(0.5)
            job.refresh_from_db()

    assert job.status == ImportJob.Status.SUCCEEDED, (job.error, _worker_log(tmp_path))
    assert requeued_after is not None and requeued_after < LEASE_S + 1.5
    assert Suite.objects.count() == 1 and Run.objects.count() == 1
    assert job.run == Run.objects.get() and job.summary["trials"] == ROWS
    assert Trial.objects.filter(run=job.run).count() == ROWS  # every row once
