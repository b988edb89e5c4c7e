"""The transactional outbox (core.outbox): a message is committed with its rows, sent after
commit, left for the sweeper when the broker refuses it, and sent again after the grace
period. The broker is the project's Celery app with a task whose publish we control."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from config.celery import app
from core import outbox
from core.models import OutboxMessage
from core.outbox import (
    outbox_enqueue,
    outbox_enqueue_many,
    outbox_publish,
    outbox_publish_many,
    outbox_resend,
    outbox_unsent,
)
from evals.tasks import top_up_advance

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker(monkeypatch):
    """Celery not eager; ``top_up_advance.delay`` records its arguments, or raises the
    broker's connection error while ``broker.down`` is set."""

    class Broker:
        down = False
        sent: list[tuple] = []

        def delay(self, *args):
            if self.down:
                raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
            self.sent.append(args)

    stub = Broker()
    stub.sent = []
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = False
    monkeypatch.setattr(top_up_advance, "delay", stub.delay)
    monkeypatch.setattr(outbox, "_broker_down_until", 0.0)
    yield stub
    app.conf.task_always_eager = saved
    outbox._broker_down_until = 0.0


def test_it_writes_the_message_in_the_transaction_and_sends_it_after_commit(
    broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        message = outbox_enqueue(top_up_advance, 7, subject="evals.top_up:7")
        assert broker.sent == []  # nothing leaves before commit
    assert len(callbacks) == 1
    assert broker.sent == [(7,)]
    message.refresh_from_db()
    assert message.sent_at is not None and message.attempts == 1
    assert outbox_unsent(subject="evals.top_up:7") == 0


def test_a_rolled_back_transaction_sends_nothing(broker, django_capture_on_commit_callbacks):
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        outbox_enqueue(top_up_advance, 7)
        raise RuntimeError("the service failed")
    assert broker.sent == [] and not OutboxMessage.objects.exists()


def test_a_refused_publish_leaves_the_message_for_the_sweeper(
    broker, django_capture_on_commit_callbacks
):
    broker.down = True
    with django_capture_on_commit_callbacks(execute=True):
        first = outbox_enqueue(top_up_advance, 1, subject="s")
        second = outbox_enqueue(top_up_advance, 2, subject="s")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.sent_at is None and "Connection refused" in first.last_error
    # The second is not even tried while the broker was refusing a moment ago.
    assert second.sent_at is None and second.last_error.startswith("not tried")
    assert outbox_unsent(subject="s") == 2

    # Within the grace period the sweeper leaves them; the broker still down: nothing sent.
    assert outbox_resend() == 0
    later = timezone.now() + timedelta(minutes=1)
    assert outbox_resend(now=later) == 0
    assert outbox_unsent(subject="s") == 2

    broker.down = False  # the broker is back
    assert outbox_resend(now=later) == 2
    assert broker.sent == [(1,), (2,)]
    assert outbox_unsent(subject="s") == 0
    assert outbox_resend(now=later) == 0  # sent once: a second sweep sends nothing


def test_a_sent_message_is_not_sent_again(broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        message = outbox_enqueue(top_up_advance, 3)
    assert outbox_publish(message.id) is False
    assert broker.sent == [(3,)]


def test_sent_messages_are_deleted_after_a_day(broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        outbox_enqueue(top_up_advance, 3)
    outbox_resend(now=timezone.now() + timedelta(hours=1))
    assert OutboxMessage.objects.count() == 1
    outbox_resend(now=timezone.now() + timedelta(days=2))
    assert not OutboxMessage.objects.exists()


def test_an_eager_task_that_raises_propagates_and_is_not_taken_for_an_outage(
    monkeypatch, django_capture_on_commit_callbacks
):
    def broken(*args):
        raise ValueError("the task itself failed")

    monkeypatch.setattr(top_up_advance, "delay", broken)
    with pytest.raises(ValueError), django_capture_on_commit_callbacks(execute=True):
        message = outbox_enqueue(top_up_advance, 4)
    message.refresh_from_db()
    assert message.sent_at is not None  # eager: handed over, the error is the task's own


def test_many_messages_are_written_with_one_insert_and_sent_in_order_after_commit(
    broker, django_capture_on_commit_callbacks, django_assert_max_num_queries
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks, transaction.atomic():
        with django_assert_max_num_queries(1):
            ids = outbox_enqueue_many(top_up_advance, [(n,) for n in range(50)], subject="m")
        assert broker.sent == []  # nothing leaves before commit
    assert len(callbacks) == 1
    with django_assert_max_num_queries(2):  # one read, one update, whatever the count
        callbacks[0]()
    assert broker.sent == [(n,) for n in range(50)]
    assert list(OutboxMessage.objects.filter(id__in=ids).order_by("id").values_list("id")) == [
        (i,) for i in ids
    ]
    assert outbox_unsent(subject="m") == 0
    assert outbox_publish_many(ids) == 0  # sent once: a second publish sends nothing


def test_many_messages_a_refused_broker_leaves_to_the_sweeper(
    broker, django_capture_on_commit_callbacks
):
    broker.down = True
    with django_capture_on_commit_callbacks(execute=True):
        ids = outbox_enqueue_many(top_up_advance, [(1,), (2,), (3,)], subject="m")
    first, *rest = OutboxMessage.objects.filter(id__in=ids).order_by("id")
    assert first.sent_at is None and "Connection refused" in first.last_error
    assert all(m.sent_at is None and m.last_error.startswith("not tried") for m in rest)
    assert broker.sent == []

    broker.down = False  # the broker is back: the sweeper sends them, in order
    assert outbox_resend(now=timezone.now() + timedelta(minutes=1)) == 3
    assert broker.sent == [(1,), (2,), (3,)]
