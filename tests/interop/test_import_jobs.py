"""Large imports from the dashboard run in the background (interop.import_jobs): the page
redirects to a job whose progress is polled, the import stays all or nothing with errors
naming the row and field, and a database busy with another writer never fails it."""

from __future__ import annotations

import io
import threading
import time
from datetime import timedelta

import pytest
from django.core.cache import caches
from django.db import OperationalError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from evals.models import Run, Suite
from interop import import_jobs
from interop.import_jobs import (
    DatabaseBusy,
    _progress_key,
    _progress_watch,
    import_job_execute,
    import_job_progress,
    import_jobs_sweep,
)
from interop.models import ImportJob
from tests.conftest import PASSWORD, _user
from tests.import_helpers import upload_post

URL = "/imports/new/"
GOOD_CSV = b"case_id,input,output,passed\nc1,q1,a1,true\nc2,q2,a2,false\n"
BAD_CSV = b'case_id,input,created_at\nc1,ok,"""><svg onload=alert(3)>"\n'


@pytest.fixture
def background(settings):
    """Every upload over 16 bytes goes to the background."""
    settings.ASSAY = {**settings.ASSAY, "IMPORT_INLINE_BYTES": 16}
    return settings


def _post(client, data: bytes, name="results.csv", **fields):
    return upload_post(client, data, name, **fields)


@pytest.mark.django_db
def test_a_large_upload_becomes_a_job_that_imports_after_commit(
    client, carol, background, django_capture_on_commit_callbacks
):
    assert client.login(username="carol", password=PASSWORD)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = _post(client, GOOD_CSV)
    job = ImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("interop:import-job", kwargs={"job_id": job.uuid})
    assert len(callbacks) == 1  # the task is sent once the job row is committed

    job.refresh_from_db()
    run = Run.objects.get()
    assert (job.status, job.run, job.summary["trials"]) == ("succeeded", run, 2)
    assert job.file.name == ""  # the stored upload is gone
    page = client.get(response["Location"]).content.decode()
    assert "Imported 2 trials of 2 cases." in page
    assert reverse("evals:run-detail", kwargs={"run_id": run.uuid}) in page
    assert "hx-trigger" not in page  # ended: nothing polls


@pytest.mark.django_db
def test_a_bad_row_fails_the_job_names_row_and_field_and_stores_nothing(
    client, carol, background, django_capture_on_commit_callbacks
):
    assert client.login(username="carol", password=PASSWORD)
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(
            client, BAD_CSV, mapping="case_id=case_id\ninput=input\ncreated_at=created_at"
        )
    job = ImportJob.objects.get()
    assert job.status == "failed"
    assert job.error_field == "created_at"
    assert "row 1 (line 2): field created_at" in job.error
    assert Suite.objects.count() == 0 and Run.objects.count() == 0
    body = client.get(response["Location"]).content.decode()
    assert "Nothing was imported. row 1 (line 2): field created_at" in body
    assert "<svg onload" not in body  # escaped


@pytest.mark.django_db
def test_a_small_upload_is_still_imported_in_the_request(client, carol, settings):
    assert client.login(username="carol", password=PASSWORD)
    response = _post(client, GOOD_CSV)
    assert response.status_code == 302
    assert ImportJob.objects.count() == 0 and Run.objects.count() == 1


@pytest.mark.django_db
def test_the_progress_partial_polls_while_running_and_stops_once_ended(client, carol, background):
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)  # not executed: no on-commit callbacks in this test
    job = ImportJob.objects.get()
    url = reverse("interop:import-job", kwargs={"job_id": job.uuid})

    queued = client.get(url, headers={"HX-Request": "true"})
    assert queued.status_code == 200 and "Waiting for a worker" in queued.content.decode()

    ImportJob.objects.filter(id=job.id).update(status="running")
    read = job.size_bytes // 2
    caches["progress"].set(_progress_key(job), read)
    running = client.get(url, headers={"HX-Request": "true"})
    body = running.content.decode()
    percent = 100 * read // job.size_bytes
    assert 40 <= percent <= 50
    assert running.status_code == 200 and f"<strong>{percent}%</strong>" in body
    assert 'hx-trigger="every 1s"' in body and "<h1>" not in body  # the partial alone

    ImportJob.objects.filter(id=job.id).update(status="queued")
    import_job_execute(job_id=job.id)
    ended = client.get(url, headers={"HX-Request": "true"})
    assert ended.status_code == 286  # htmx stops polling
    assert "Imported 2 trials" in ended.content.decode()


@pytest.mark.django_db
def test_a_redelivered_task_imports_once(carol, background, client):
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    job = ImportJob.objects.get()
    import_job_execute(job_id=job.id)
    import_job_execute(job_id=job.id)
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_only_its_creator_and_leads_see_a_job(client, carol, alice, background):
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    url = reverse("interop:import-job", kwargs={"job_id": ImportJob.objects.get().uuid})
    assert client.get(url).status_code == 200
    _user("dave", "engineer")
    assert client.login(username="dave", password=PASSWORD)
    assert client.get(url).status_code == 404
    assert client.login(username="alice", password=PASSWORD)
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_a_locked_database_requeues_the_job_for_a_retry(client, carol, background, monkeypatch):
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    job = ImportJob.objects.get()

    def locked(**kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(import_jobs, "results_import", locked)
    with pytest.raises(DatabaseBusy):
        import_job_execute(job_id=job.id)
    job.refresh_from_db()
    assert job.status == "queued" and job.file.name  # the upload is kept for the retry


@pytest.mark.django_db
def test_an_upload_the_worker_cannot_find_fails_the_job_saying_why(client, carol, background):
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    job = ImportJob.objects.get()
    job.file.storage.delete(job.file.name)
    import_job_execute(job_id=job.id)
    job.refresh_from_db()
    assert job.status == "failed" and job.error_field == "file"
    assert "shared default storage" in job.error and Run.objects.count() == 0


def test_the_watcher_writes_the_files_position(tmp_path):
    """The position is the operating system's: what was read plus at most one buffer."""
    path = tmp_path / "f.csv"
    path.write_bytes(b"x" * 100_000)
    job = ImportJob(id=1, size_bytes=100_000)
    with path.open("rb") as stream:
        stream.read(30_000)
        stop = threading.Event()
        thread = _progress_watch(job, stream, stop)
        deadline = time.monotonic() + 5
        while caches["progress"].get(_progress_key(job)) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        thread.join()
    assert 30_000 <= caches["progress"].get(_progress_key(job)) <= 30_000 + io.DEFAULT_BUFFER_SIZE
    job.status = "running"
    assert 30 <= import_job_progress(job=job).percent < 40


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_import_waits_for_a_concurrent_writer_instead_of_failing(carol, background, client):
    """Another connection holds the write lock for 1.5 s while the import starts: on
    SQLite (WAL, busy timeout) the import waits its turn and succeeds."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] >= 30_000
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    job = ImportJob.objects.get()
    holding, release = threading.Event(), threading.Event()

    def writer():
        try:
            with transaction.atomic():
                Suite.objects.create(name="held by another writer")
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert holding.wait(10)
    timer = threading.Timer(1.5, release.set)
    timer.start()
    began = time.monotonic()
    import_job_execute(job_id=job.id)
    waited = time.monotonic() - began
    thread.join()
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    assert Suite.objects.filter(name__in=["S", "held by another writer"]).count() == 2
    if connection.vendor == "sqlite":
        assert waited >= 1.0  # it did wait for the lock (PostgreSQL has row locks only)


@pytest.mark.django_db
def test_a_job_whose_lease_ran_out_is_queued_again_and_imports_once(
    carol, background, client, settings, django_capture_on_commit_callbacks
):
    """A worker killed mid-import leaves the job ``running`` with nothing written (one
    transaction) and its lease no longer renewed. Once the lease has run out the sweep
    queues it again; the import then runs once. A job within its lease is left alone, and
    a renewed lease (the cache) keeps a job older than a lease."""
    settings.ASSAY = {**settings.ASSAY, "TRIAL_LEASE_SECONDS": 60}
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    job = ImportJob.objects.get()
    started = timezone.now() - timedelta(seconds=50)
    ImportJob.objects.filter(id=job.id).update(status="running", started_at=started)
    assert import_jobs_sweep() == 0  # within its lease: maybe alive
    ImportJob.objects.filter(id=job.id).update(started_at=started - timedelta(seconds=20))
    caches["progress"].set(import_jobs._lease_key(job), time.time() + 30)
    assert import_jobs_sweep() == 0  # renewed by its worker's watcher
    caches["progress"].set(import_jobs._lease_key(job), time.time() - 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert import_jobs_sweep() == 1
    job.refresh_from_db()
    assert job.status == "succeeded" and Run.objects.count() == 1
    assert caches["progress"].get(import_jobs._lease_key(job)) is None  # dropped at its end
    assert import_jobs_sweep() == 0


@pytest.mark.django_db
def test_an_import_whose_claim_was_taken_meanwhile_rolls_back_whole(
    carol, background, client, monkeypatch
):
    """The job was taken back while this worker imported it (its claim's ``started_at`` is
    no longer the job's): the rows and the job's end are not committed."""
    assert client.login(username="carol", password=PASSWORD)
    _post(client, GOOD_CSV)
    job = ImportJob.objects.get()
    real = import_jobs.results_import
    later = timezone.now() + timedelta(seconds=5)

    def taken_back(**kwargs):
        summary = real(**kwargs)
        ImportJob.objects.filter(id=job.id).update(started_at=later)  # another worker's claim
        return summary

    monkeypatch.setattr(import_jobs, "results_import", taken_back)
    import_job_execute(job_id=job.id)
    job.refresh_from_db()
    assert Run.objects.count() == 0 and Suite.objects.count() == 0
    assert job.status == "running" and job.file.name  # left to the worker that holds it
