"""The transactional outbox: every Celery task is written with its rows and published after
commit; the sweeper (``outbox_resend``) sends what the broker refused. A message may arrive
twice: every task is idempotent. After a failure the process skips the broker for
``BROKER_DOWN_SECONDS``, so a start during an outage answers at once."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.models import OutboxMessage

if TYPE_CHECKING:
    from celery import Task

logger = logging.getLogger(__name__)

# After a failed publish, this process leaves new messages to the sweeper for this long.
BROKER_DOWN_SECONDS = 5.0
_broker_down_until = 0.0

# Sent messages are kept this long (for "what was sent when"), then deleted by the sweep.
SENT_KEPT = timedelta(days=1)


def outbox_enqueue(task: Task[..., Any], *args: object, subject: str = "") -> OutboxMessage:
    """Write ``task(*args)`` (JSON-serialisable args) in the caller's transaction, publish after
    commit; returns the row."""
    message = OutboxMessage.objects.create(task=task.name, args=list(args), subject=subject)
    transaction.on_commit(partial(outbox_publish, message.id))
    return message


def outbox_enqueue_many(
    task: Task[..., Any], args_list: list[tuple[object, ...]], *, subject: str = ""
) -> list[int]:
    """``outbox_enqueue`` for each of ``args_list`` with one INSERT and one after-commit hook,
    published in order; returns the ids in that order."""
    if not args_list:
        return []
    rows = OutboxMessage.objects.bulk_create(
        [OutboxMessage(task=task.name, args=list(args), subject=subject) for args in args_list]
    )
    ids = [row.id for row in rows]  # PostgreSQL and SQLite return the ids of a bulk insert
    transaction.on_commit(partial(outbox_publish_many, ids))
    return ids


def outbox_publish_many(message_ids: list[int]) -> int:
    """Publish the unsent ones of ``message_ids`` in order and mark those sent (one read, one
    update); returns how many. At the first refusal the rest wait for the sweeper. Under
    ``CELERY_TASK_ALWAYS_EAGER`` each goes through ``outbox_publish``."""
    global _broker_down_until  # noqa: PLW0603 - one flag per process, see module doc
    if current_app.conf.task_always_eager:
        return sum(outbox_publish(message_id) for message_id in message_ids)
    position = {message_id: i for i, message_id in enumerate(message_ids)}
    unsent = sorted(
        OutboxMessage.objects.filter(id__in=message_ids, sent_at__isnull=True).values_list(
            "id", "task", "args"
        ),
        key=lambda row: position[row[0]],
    )
    sent: list[int] = []
    refused = None
    for message_id, task, args in unsent:
        if time.monotonic() < _broker_down_until:
            break
        try:
            current_app.tasks[task].delay(*args)
        except Exception as exc:  # noqa: BLE001 - any publish failure leaves the rows for the sweeper
            _broker_down_until = time.monotonic() + BROKER_DOWN_SECONDS
            logger.warning("task %s not published (%s); the sweeper will send it", task, exc)
            _mark_failed(message_id, f"{type(exc).__name__}: {exc}")
            refused = message_id
            break
        _broker_down_until = 0.0
        sent.append(message_id)
    if sent:
        OutboxMessage.objects.filter(id__in=sent, sent_at__isnull=True).update(
            sent_at=timezone.now(), attempts=F("attempts") + 1
        )
    done = {*sent, refused}
    left = [row[0] for row in unsent if row[0] not in done]
    if left:
        OutboxMessage.objects.filter(id__in=left, sent_at__isnull=True).update(
            attempts=F("attempts") + 1,
            last_error="not tried: the broker was unreachable a moment ago",
        )
    return len(sent)


def outbox_publish(message_id: int) -> bool:
    """Publish one unsent message and mark it sent; False when already sent or refused. Eager: the
    row is marked first, so a task's own error propagates and is not taken for an outage."""
    global _broker_down_until  # noqa: PLW0603 - one flag per process, see module doc
    message = OutboxMessage.objects.filter(id=message_id, sent_at__isnull=True).first()
    if message is None:
        return False
    if current_app.conf.task_always_eager:
        _mark_sent(message.id)
        current_app.tasks[message.task].delay(*message.args)
        return True
    if time.monotonic() < _broker_down_until:
        _mark_failed(message.id, "not tried: the broker was unreachable a moment ago")
        return False
    try:
        current_app.tasks[message.task].delay(*message.args)
    except Exception as exc:  # noqa: BLE001 - any publish failure leaves the row for the sweeper
        _broker_down_until = time.monotonic() + BROKER_DOWN_SECONDS
        logger.warning("task %s not published (%s); the sweeper will send it", message, exc)
        _mark_failed(message.id, f"{type(exc).__name__}: {exc}")
        return False
    _broker_down_until = 0.0
    _mark_sent(message.id)
    return True


def _mark_sent(message_id: int) -> None:
    OutboxMessage.objects.filter(id=message_id, sent_at__isnull=True).update(
        sent_at=timezone.now(), attempts=F("attempts") + 1
    )


def _mark_failed(message_id: int, error: str) -> None:
    OutboxMessage.objects.filter(id=message_id, sent_at__isnull=True).update(
        attempts=F("attempts") + 1, last_error=error[:1000]
    )


def outbox_resend(*, now: datetime | None = None) -> int:
    """Publish every message unsent ``OUTBOX_GRACE_SECONDS`` after writing, oldest first, stopping
    at the first refusal; delete sent ones older than a day. Returns how many were sent."""
    global _broker_down_until  # noqa: PLW0603 - the sweep always tries the broker
    now = now or timezone.now()
    grace = timedelta(seconds=settings.ASSAY["OUTBOX_GRACE_SECONDS"])
    OutboxMessage.objects.filter(sent_at__lt=now - SENT_KEPT).delete()
    due = list(
        OutboxMessage.objects.unsent()
        .filter(created_at__lte=now - grace)
        .order_by("id")
        .values_list("id", flat=True)
    )
    _broker_down_until = 0.0
    sent = 0
    for message_id in due:
        if outbox_publish(message_id):
            sent += 1
        elif time.monotonic() < _broker_down_until:
            break  # the broker is still down: the next sweep tries again
    return sent


def outbox_written_since(*, subject: str, since: datetime) -> bool:
    """Whether a message about ``subject`` was written at or after ``since``."""
    return OutboxMessage.objects.filter(subject=subject, created_at__gte=since).exists()


def outbox_unsent(*, subject: str) -> int:
    """How many messages about ``subject`` still wait for the broker."""
    return OutboxMessage.objects.unsent().filter(subject=subject).count()
