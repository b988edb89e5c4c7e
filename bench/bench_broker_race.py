"""The filesystem broker's read-before-write race (kombu #1551), kombu's channel vs Assay's.

For each transport, a producer process writes --messages messages (--size bytes each) to a
queue folder while a consumer process polls it as fast as it can, as the Celery worker does
(every second by default; here without pause, to make a rare window frequent). Prints, per
transport: messages received whole, messages that could not be decoded (kombu's
``JSONDecodeError``, which stops a Celery worker) and messages lost.

    python bench/bench_broker_race.py --messages 5000
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path
from queue import Empty

TRANSPORTS = {
    "kombu filesystem": "kombu.transport.filesystem:Transport",
    "core.filesystem_broker": "core.filesystem_broker:Transport",
}


def _channel(transport: str, folder: Path):
    from kombu import Connection

    conn = Connection(
        "filesystem://",
        transport=transport,
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder.parent / "control"),
        },
    )
    return conn, conn.default_channel


def _produce(transport: str, folder: Path, messages: int, size: int) -> None:
    conn, channel = _channel(transport, folder)
    body = "x" * size
    for i in range(messages):
        channel._put("race", {"n": i, "body": body})
    conn.release()


def _consume(transport: str, folder: Path, messages: int, done, out) -> None:
    conn, channel = _channel(transport, folder)
    whole = broken = 0
    while whole + broken < messages:
        try:
            channel._get("race")
            whole += 1
        except Empty:
            if done.is_set() and channel._size("race") == 0:
                break
        except ValueError:  # json.JSONDecodeError
            broken += 1
    conn.release()
    out.put((whole, broken))


def race(transport: str, messages: int, size: int) -> tuple[int, int, int, float]:
    """(whole, undecodable, lost, seconds) for one transport."""
    folder = Path(tempfile.mkdtemp(prefix="assay-race-")) / "broker"
    folder.mkdir()
    done = multiprocessing.Event()
    out = multiprocessing.Queue()
    consumer = multiprocessing.Process(
        target=_consume, args=(transport, folder, messages, done, out)
    )
    began = time.perf_counter()
    consumer.start()
    _produce(transport, folder, messages, size)
    done.set()
    whole, broken = out.get(timeout=600)
    consumer.join()
    return whole, broken, messages - whole - broken, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--size", type=int, default=4096, help="bytes of body per message")
    args = parser.parse_args()
    print(f"{args.messages} messages of {args.size} bytes, one producer, one polling consumer")
    for label, transport in TRANSPORTS.items():
        whole, broken, lost, seconds = race(transport, args.messages, args.size)
        print(
            f"{label:24s} whole {whole:6d}  undecodable {broken:5d}  lost {lost:5d}  "
            f"({seconds:.1f} s)"
        )


if __name__ == "__main__":
    main()
