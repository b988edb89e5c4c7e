"""/healthz and /readyz: liveness asks nothing; readiness names each check (database, broker,
worker, outbox) with ok or failed and a reason, 200 or 503. The real worker's side is in
tests/evals/test_worker_metrics.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from config.celery import app
from core.health import worker_check
from core.models import OutboxMessage, WorkerHeartbeat
from tests.broker import broker_unreachable

pytestmark = pytest.mark.django_db


@pytest.fixture
def not_eager(settings):
    """Tasks go to a broker and a worker (the production shape) for the test's checks."""
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield settings
    app.conf.task_always_eager = saved


def _checks(response) -> dict[str, dict]:
    return {c["name"]: c for c in response.json()["checks"]}


def _beat(seconds_ago: float) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        hostname="w1@host",
        defaults={
            "pid": 1,
            "started_at": now - timedelta(hours=1),
            "beat_at": now - timedelta(seconds=seconds_ago),
        },
    )


def test_healthz_answers_without_a_session_or_the_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200 and response.content == b"ok"
    assert Client().head("/healthz").status_code == 200


def test_readyz_is_200_when_every_check_passes(not_eager):
    _beat(1)
    response = Client().get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "ok"
    checks = _checks(response)
    assert list(checks) == ["database", "broker", "worker", "outbox"]
    assert all(c["status"] == "ok" and c["reason"] for c in checks.values())
    assert response["Cache-Control"].startswith("max-age=0")


def test_readyz_is_503_naming_a_missing_worker(not_eager):
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "failed"
    worker = _checks(response)["worker"]
    assert worker == {
        "name": "worker",
        "status": "failed",
        "reason": "no worker has ever written a heartbeat",
    }
    assert _checks(response)["database"]["status"] == "ok"


def test_the_worker_threshold_is_60_seconds_unless_set(not_eager):
    assert not_eager.ASSAY["WORKER_SILENT_SECONDS"] == 60
    _beat(0)
    beat_at = WorkerHeartbeat.objects.get().beat_at
    assert worker_check(now=beat_at + timedelta(seconds=59)).ok
    late = worker_check(now=beat_at + timedelta(seconds=61))
    assert not late.ok and late.reason == "the newest heartbeat is 61 s old (limit 60 s)"


def test_a_stuck_outbox_message_fails_readiness(not_eager):
    _beat(1)
    limit = not_eager.ASSAY["READY_OUTBOX_SECONDS"]
    OutboxMessage.objects.create(task="t", created_at=timezone.now() - timedelta(seconds=limit - 5))
    assert Client().get("/readyz").status_code == 200
    OutboxMessage.objects.create(task="t", created_at=timezone.now() - timedelta(seconds=limit + 5))
    response = Client().get("/readyz")
    assert response.status_code == 503
    outbox = _checks(response)["outbox"]
    assert outbox["status"] == "failed" and f"(limit {limit} s)" in outbox["reason"]


def test_an_unreachable_broker_fails_readiness_without_naming_its_address(not_eager, caplog):
    _beat(1)
    with broker_unreachable():
        response = Client().get("/readyz")
    assert response.status_code == 503
    broker = _checks(response)["broker"]
    assert broker["status"] == "failed"
    assert broker["reason"].startswith("the broker refused a connection (")
    assert "127.0.0.1" not in response.content.decode()
    assert "readiness check broker failed" in caplog.text


def test_a_database_error_fails_readiness_with_a_reason(not_eager, monkeypatch):
    def refuse(*args, **kwargs):
        raise connection.features.connection.Database.OperationalError("no such server")

    monkeypatch.setattr(connection, "cursor", refuse)
    response = Client().get("/readyz")
    assert response.status_code == 503
    database = _checks(response)["database"]
    assert database["status"] == "failed"
    assert database["reason"] == (
        "the database did not answer (OperationalError; see the server log)"
    )
    assert "no such server" not in response.content.decode()
