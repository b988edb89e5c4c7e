"""Liveness and readiness (docs/operations.md). ``/healthz``: the process answers, nothing else
is asked. ``/readyz``: each check by name, ok or failed with a reason: the database answers,
the broker accepts a connection, a worker wrote a heartbeat within
``ASSAY_WORKER_SILENT_SECONDS`` (``core.heartbeat``), and no outbox message has waited
longer than ``ASSAY_READY_OUTBOX_SECONDS`` (``core.outbox``). A reason never holds an
error's text (it may name hosts or users and the page is public): the error is logged."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.heartbeat import worker_last_seen
from core.models import OutboxMessage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    """One readiness check: ``name``, ``ok``, ``reason`` (one sentence, always set)."""

    name: str
    ok: bool
    reason: str


def _failed(name: str, what: str, exc: Exception) -> Check:
    logger.warning("readiness check %s failed: %s", name, what, exc_info=exc)
    return Check(name, False, f"{what} ({type(exc).__name__}; see the server log)")


def database_check(*, now: datetime) -> Check:
    """The default database answers ``SELECT 1``."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure is the check's answer
        return _failed("database", "the database did not answer", exc)
    return Check("database", True, "the database answered")


def broker_check(*, now: datetime) -> Check:
    """The broker accepts a connection (one try, Celery's ``broker_connection_timeout``); the
    embedded broker's folder is writable. Eager mode needs no broker."""
    if current_app.conf.task_always_eager:
        return Check("broker", True, "tasks run in the calling process (eager): no broker")
    try:
        with current_app.connection_for_write() as broker:
            broker.ensure_connection(max_retries=1)
            folder = (broker.transport_options or {}).get("data_folder_in")
            if folder and not os.access(folder, os.W_OK):
                return Check("broker", False, "the embedded broker's folder is not writable")
    except Exception as exc:  # noqa: BLE001 - any failure is the check's answer
        return _failed("broker", "the broker refused a connection", exc)
    return Check("broker", True, "the broker accepted a connection")


def worker_check(*, now: datetime) -> Check:
    """A heartbeat younger than ``WORKER_SILENT_SECONDS`` (60 s unless set); eager mode needs
    no worker."""
    if current_app.conf.task_always_eager:
        return Check("worker", True, "tasks run in the calling process (eager): no worker")
    limit = settings.ASSAY["WORKER_SILENT_SECONDS"]
    try:
        seen = worker_last_seen()
    except Exception as exc:  # noqa: BLE001 - any failure is the check's answer
        return _failed("worker", "the heartbeats could not be read", exc)
    if seen is None:
        return Check("worker", False, "no worker has ever written a heartbeat")
    age = (now - seen).total_seconds()
    if age > limit:
        return Check("worker", False, f"the newest heartbeat is {age:.0f} s old (limit {limit} s)")
    return Check("worker", True, f"the newest heartbeat is {age:.0f} s old (limit {limit} s)")


def outbox_check(*, now: datetime) -> Check:
    """No unsent outbox message older than ``READY_OUTBOX_SECONDS`` (one read on the unsent
    messages' partial index)."""
    limit = settings.ASSAY["READY_OUTBOX_SECONDS"]
    try:
        oldest = (
            OutboxMessage.objects.unsent()
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
        )
    except Exception as exc:  # noqa: BLE001 - any failure is the check's answer
        return _failed("outbox", "the outbox could not be read", exc)
    if oldest is None:
        return Check("outbox", True, "no message waits for the broker")
    age = (now - oldest).total_seconds()
    if age > limit:
        return Check("outbox", False, f"a message has waited {age:.0f} s (limit {limit} s)")
    return Check("outbox", True, f"the oldest unsent message has waited {age:.0f} s")


CHECKS: tuple[Callable[..., Check], ...] = (
    database_check,
    broker_check,
    worker_check,
    outbox_check,
)


def readiness_checks(*, now: datetime | None = None) -> list[Check]:
    """Every check, in order; the database's failure makes the later ones fail with their own
    reason (they read it too)."""
    now = now or timezone.now()
    return [check(now=now) for check in CHECKS]
