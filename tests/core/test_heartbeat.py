"""core.heartbeat: the "no worker" banner appears when no worker has answered for a minute.

The last test starts a real Celery worker process (the embedded broker, or Redis when
REDIS_URL is set) and waits for the heartbeat it writes on its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from core.heartbeat import worker_heartbeat_record, worker_missing
from core.models import WorkerHeartbeat
from tests.conftest import PASSWORD, PROJECT_DIR
from tests.evals.test_worker import _database_url

BANNER = 'id="worker-missing"'


@pytest.fixture
def not_eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    return settings


@pytest.mark.django_db
def test_no_heartbeat_at_all_means_missing(not_eager):
    assert worker_missing() is True


@pytest.mark.django_db
def test_a_heartbeat_younger_than_a_minute_means_a_worker(not_eager):
    started = timezone.now()
    worker_heartbeat_record(hostname="celery@a", started_at=started)
    assert worker_missing() is False
    assert worker_missing(now=timezone.now() + timedelta(seconds=59)) is False
    assert worker_missing(now=timezone.now() + timedelta(seconds=61)) is True


@pytest.mark.django_db
def test_a_new_heartbeat_updates_the_workers_row(not_eager):
    started = timezone.now() - timedelta(hours=1)
    first = worker_heartbeat_record(hostname="celery@a", started_at=started)
    second = worker_heartbeat_record(hostname="celery@a", started_at=started)
    assert WorkerHeartbeat.objects.count() == 1
    assert second.beat_at >= first.beat_at and second.pid == os.getpid()


@pytest.mark.django_db
def test_eager_tasks_need_no_worker(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert worker_missing() is False


@pytest.mark.django_db
def test_the_dashboard_shows_the_banner_only_while_no_worker_answers(client, carol, not_eager):
    client.login(username="carol", password=PASSWORD)
    url = reverse("evals:run-list")
    assert BANNER in client.get(url).content.decode()

    worker_heartbeat_record(hostname="celery@a", started_at=timezone.now())
    assert BANNER not in client.get(url).content.decode()

    WorkerHeartbeat.objects.update(beat_at=timezone.now() - timedelta(seconds=90))
    page = client.get(url).content.decode()
    assert BANNER in page and "No worker has answered for a minute" in page


@pytest.mark.django_db
def test_the_login_page_never_shows_the_banner(client, not_eager):
    assert BANNER not in client.get(reverse("login")).content.decode()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_real_worker_writes_its_heartbeat_and_a_killed_one_stops(tmp_path, not_eager):
    env = os.environ.copy()
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=_database_url(),
        CELERY_TASK_ALWAYS_EAGER="false",
        DEBUG="true",
    )
    queue = f"assay-test-{uuid.uuid4().hex[:12]}"
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
         "--queues", queue, "--hostname", f"{queue}@%h", "--loglevel", "INFO",
         "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 25
        row = None
        while row is None and time.monotonic() < deadline:
            row = WorkerHeartbeat.objects.filter(hostname__startswith=queue).first()
            time.sleep(0.2)
        assert row is not None, (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
        assert row.pid == worker.pid
        assert worker_missing() is False
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        log.close()
    # A killed worker writes nothing more: a minute later the banner is due.
    beat_at = WorkerHeartbeat.objects.get(hostname__startswith=queue).beat_at
    time.sleep(0.5)
    assert WorkerHeartbeat.objects.get(hostname__startswith=queue).beat_at == beat_at
    later = beat_at + timedelta(seconds=60 + not_eager.ASSAY["HEARTBEAT_SECONDS"])
    assert worker_missing(now=later) is True
