"""core.filesystem_broker: the embedded default's broker never hands a consumer half a file.

kombu's own filesystem transport creates a message file before writing it, so a consumer
that polls in between reads ``b""`` and the Celery worker stops with ``JSONDecodeError``
(kombu #1551). These tests drive the hardened transport through kombu itself.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection, Exchange, Queue

from core.filesystem_broker import CORRUPT, Channel, FolderWatch, file_write_atomic

TRANSPORT = "core.filesystem_broker:Transport"


def _connection(folder: Path) -> Connection:
    broker = folder / "broker"
    broker.mkdir(exist_ok=True)
    return Connection(
        "filesystem://",
        transport=TRANSPORT,
        transport_options={
            "data_folder_in": str(broker),
            "data_folder_out": str(broker),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.01,
        },
    )


def _queue(name: str) -> Queue:
    # kombu's virtual transports keep bindings in a process-wide state: one name per test.
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def test_messages_round_trip_in_order_and_leave_no_files(tmp_path):
    queue = _queue("round-trip")
    with _connection(tmp_path) as conn:
        producer = conn.Producer()
        for i in range(5):
            producer.publish(
                {"n": i}, exchange=queue.exchange, routing_key=queue.name, declare=[queue]
            )
        simple = conn.SimpleQueue(queue)
        got = []
        for _ in range(5):
            message = simple.get(timeout=2)
            got.append(message.payload["n"])
            message.ack()
        with pytest.raises(simple.Empty):
            simple.get(timeout=0.05)
        simple.close()
    assert got == [0, 1, 2, 3, 4]
    broker = tmp_path / "broker"
    assert [p for p in os.listdir(broker) if not p.startswith(".")] == []
    assert os.listdir(broker / ".claimed") == []


def test_an_empty_message_file_is_set_aside_and_the_next_message_is_delivered(tmp_path):
    """The state kombu's race leaves behind (a ``.msg`` file not yet written): the consumer
    moves it to ``.corrupt/`` and goes on, instead of raising ``JSONDecodeError``."""
    queue = _queue("tasks")
    with _connection(tmp_path) as conn:
        channel = conn.default_channel
        queue(channel).declare()
        broker = tmp_path / "broker"
        (broker / "00000000000000000000_empty.tasks.msg").write_bytes(b"")
        conn.Producer().publish({"n": 1}, exchange=queue.exchange, routing_key="tasks")

        simple = conn.SimpleQueue(queue)
        message = simple.get(timeout=2)
        message.ack()
        simple.close()

    assert message.payload == {"n": 1}
    assert os.listdir(broker / CORRUPT) == ["00000000000000000000_empty.tasks.msg"]


def test_a_consumer_polling_while_a_producer_writes_always_reads_whole_messages(tmp_path):
    """A producer thread writes 300 messages of 64 KB while a consumer polls the folder as
    fast as it can: every message arrives once, whole and in order, and none is set aside."""
    count = 300
    body = "x" * 65536
    with _connection(tmp_path) as producer_conn, _connection(tmp_path) as consumer_conn:
        producer: Channel = producer_conn.default_channel
        consumer: Channel = consumer_conn.default_channel

        def produce():
            for i in range(count):
                producer._put("tasks", {"n": i, "body": body})

        thread = threading.Thread(target=produce)
        thread.start()
        received = []
        while len(received) < count and (thread.is_alive() or consumer._size("tasks")):
            try:
                received.append(consumer._get("tasks"))
            except Empty:
                continue
        thread.join()

    assert [m["n"] for m in received] == list(range(count))
    assert all(m["body"] == body for m in received)
    assert not (tmp_path / "broker" / CORRUPT).exists()


def test_exchange_tables_are_replaced_whole_while_read(tmp_path):
    """Binding 200 queues while another thread reads the table: every read is a valid
    table (kombu's own transport truncates the file first, so a reader can see it empty)."""
    with _connection(tmp_path) as writer_conn, _connection(tmp_path) as reader_conn:
        writer: Channel = writer_conn.default_channel
        reader: Channel = reader_conn.default_channel
        writer._queue_bind("jobs", "first", "", "first")
        stop = threading.Event()
        sizes = []
        errors = []

        def read():
            while not stop.is_set():
                try:
                    sizes.append(len(reader.get_table("jobs")))
                except Exception as error:  # noqa: BLE001 - any failure is the finding
                    errors.append(error)

        thread = threading.Thread(target=read)
        thread.start()
        for i in range(200):
            writer._queue_bind("jobs", f"key{i}", "", f"queue{i}")
        stop.set()
        thread.join()
        final = len(reader.get_table("jobs"))
        writer._delete("queue7", "jobs", "key7", "")
        after_delete = len(reader.get_table("jobs"))

    assert errors == []
    assert sizes and min(sizes) >= 1  # never empty: the first binding is in every read
    assert (final, after_delete) == (201, 200)


def test_file_write_atomic_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "table.exchange"
    file_write_atomic(target, b"[]")
    file_write_atomic(target, b'[["a", "", "a"]]')
    assert target.read_bytes() == b'[["a", "", "a"]]'
    assert os.listdir(tmp_path) == ["table.exchange"]


@pytest.mark.skipif(not FolderWatch(".").available, reason="inotify is Linux's")
def test_a_waiting_consumer_wakes_when_a_message_lands_not_at_its_polling_interval(tmp_path):
    # A polling interval of 30 s: only the folder watch can deliver within the test's time.
    queue = _queue("wakeup")
    connection = _connection(tmp_path)
    connection.transport_options["polling_interval"] = 30.0
    with connection as conn:
        simple = conn.SimpleQueue(queue)
        with pytest.raises(simple.Empty):
            simple.get(timeout=0.05)  # the consumer is set up and has scanned once
        sent_at: list[float] = []

        def publish_later() -> None:
            time.sleep(0.3)
            with _connection(tmp_path) as other:
                sent_at.append(time.monotonic())
                other.Producer().publish(
                    {"n": 1}, exchange=queue.exchange, routing_key=queue.name, declare=[queue]
                )

        thread = threading.Thread(target=publish_later)
        thread.start()
        message = simple.get(timeout=10)
        received_at = time.monotonic()
        thread.join()
        message.ack()
        simple.close()
    assert message.payload == {"n": 1}
    assert received_at - sent_at[0] < 0.2


def test_a_consumer_without_a_folder_watch_polls(tmp_path, monkeypatch):
    monkeypatch.setattr(FolderWatch, "available", property(lambda self: False))
    queue = _queue("polling")
    with _connection(tmp_path) as conn:
        simple = conn.SimpleQueue(queue)
        conn.Producer().publish(
            {"n": 2}, exchange=queue.exchange, routing_key=queue.name, declare=[queue]
        )
        message = simple.get(timeout=2)
        message.ack()
        with pytest.raises(simple.Empty):
            simple.get(timeout=0.05)
        simple.close()
    assert message.payload == {"n": 2}
