"""A large import from the dashboard, in a real browser: the upload lands on the job page,
whose progress bar follows the worker (htmx polling) until the link to the new run shows;
a bad row ends with the error naming the row and field.

No worker runs here: the task is sent to a queue of this test's own on the test's broker
and stays there, and the test plays the worker (progress in the cache, then
``import_job_execute``), so each state of the page is seen.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.core.cache import caches

from config.celery import app
from evals.models import Run
from interop.import_jobs import _progress_key, import_job_execute
from interop.models import ImportJob
from tests.browser.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

CSV = b"case_id,input,output,passed\nc1,q1,a1,true\nc2,q2,a2,false\nc3,q3,a3,true\n"


@pytest.fixture
def queued_not_run(settings):
    """Tasks go to a broker queue nobody consumes; uploads over 16 bytes go to the
    background."""
    settings.ASSAY = {**settings.ASSAY, "IMPORT_INLINE_BYTES": 16}
    saved = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager = False
    app.conf.task_default_queue = f"assay-test-{uuid.uuid4().hex[:12]}"
    yield
    app.conf.task_always_eager, app.conf.task_default_queue = saved


def _upload(page, live_server, data: bytes, mapping: str = "") -> ImportJob:
    page.goto(f"{live_server.url}/imports/new/")
    page.set_input_files(
        "#id_file", files=[{"name": "results.csv", "mimeType": "text/csv", "buffer": data}]
    )
    page.fill("#id_suite", "S")
    page.fill("#id_run", "R")
    if mapping:
        page.fill("#id_mapping", mapping)
    page.click("form.import-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/imports/[0-9a-f-]{36}/$"))
    return ImportJob.objects.get()


def test_the_progress_bar_follows_the_import_to_the_new_run(
    browser_page, live_server, carol, queued_not_run
):
    page = browser_page
    log_in(page, live_server, "carol")
    job = _upload(page, live_server, CSV)
    section = page.locator("#import-job")
    assert "Waiting for a worker" in section.inner_text()

    page.evaluate("window.__same_document = true")  # gone if the page reloads
    ImportJob.objects.filter(id=job.id).update(status="running")
    caches["progress"].set(_progress_key(job), job.size_bytes // 2)
    page.wait_for_selector("#import-job[data-status=running]")
    percent = 100 * (job.size_bytes // 2) // job.size_bytes
    assert f"{percent}%" in page.locator("#import-job").inner_text()
    assert page.locator("#import-job progress").get_attribute("value") == str(percent)

    ImportJob.objects.filter(id=job.id).update(status="queued")
    import_job_execute(job_id=job.id)
    page.wait_for_selector("#import-job[data-status=succeeded]")
    assert "Imported 3 trials of 3 cases." in page.locator("#import-job").inner_text()
    assert page.evaluate("window.__same_document") is True  # its final state, no reload
    page.click("text=Open the run R")
    run = Run.objects.get()
    page.wait_for_url(f"**/runs/{run.uuid}/")
    assert page.console_errors == []


def test_a_bad_row_ends_with_the_error_naming_row_and_field(
    browser_page, live_server, carol, queued_not_run
):
    page = browser_page
    log_in(page, live_server, "carol")
    bad = b"case_id,input,passed\nc1,q1,true\nc2,q2,maybe\n"
    job = _upload(page, live_server, bad)
    import_job_execute(job_id=job.id)
    page.wait_for_selector("#import-job[data-status=failed]")
    error = page.locator(".import-error").inner_text()
    assert error.startswith("Nothing was imported. row 2 (line 3): field passed")
    assert Run.objects.count() == 0
