"""Sending a batch of judge calls with the database kept in the caller's thread.

``calls_send`` runs the calls (``concurrency`` in flight) on an asyncio loop in a helper
thread, talking to the caller's thread through a queue:

1. Before each call the loop asks for a permit; the caller answers the pending requests with
   one ``permit(indexes)`` (liveness check, ledger notes). A refusal stops that call and
   every later one; those in flight finish and are recorded.
2. A permitted call may still wait for the endpoint's limiter: once its first request goes out
   (``providers.limiter.SEND_HOOK``) ``sending([index, ...])`` is told, before the next
   ``record`` (the ledger's ``claimed`` -> ``sent``).
3. Answers reach ``record`` as they arrive, gathered for at most ``WRITE_WINDOW_S`` (a write
   costs a commit whatever its size); ``record`` is also called empty ``WRITE_WINDOW_S``
   after a permit or a send, so permitted and sent calls reach the ledger within that window.
4. While calls are in flight, ``renew`` runs every ``renew_every_s`` (the claims' lease).

The database is touched only in the caller's thread (its connection and transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from judges.client import DEFAULT_CONCURRENCY, JudgeClient
from judges.models import JudgeVersion
from providers.limiter import SEND_HOOK

START, SENDING, DONE, FAILED, END = "start", "sending", "done", "failed", "end"

# How long answers may gather before they are written, in seconds: each write costs a few
# statements and a commit whatever its size (bench/README.md, judge calls).
WRITE_WINDOW_S = 0.05


def version_concurrency(version: JudgeVersion) -> int:
    """``version``'s ``concurrency`` client setting (default 8, at least 1)."""
    try:
        return max(1, int(version.params.get("concurrency", DEFAULT_CONCURRENCY)))
    except (TypeError, ValueError):
        return DEFAULT_CONCURRENCY


def _grant(future: asyncio.Future, ok: bool) -> None:
    if not future.done():
        future.set_result(ok)


def calls_send(
    *,
    version: JudgeVersion,
    calls: list,
    record: Callable[[list[tuple[int, Any]]], None],
    permit: Callable[[list[int]], bool] | None = None,
    sending: Callable[[list[int]], None] | None = None,
    renew: Callable[[], object] | None = None,
    renew_every_s: float = 60.0,
    sleep=None,
) -> set[int]:
    """Send ``calls`` (``judges.grading.JudgeCall``) to ``version``'s endpoint; returns the
    indexes permitted (module docstring). ``record([(index, call with reply), ...])``,
    ``permit([index, ...])`` (None: always), ``sending([index, ...])`` and ``renew()`` run in
    the caller's thread; an exception in one stops
    the calls not yet sent, waits for those in flight (unrecorded) and is re-raised.

    Long by design: the loop (wait, permit, gather, record, renew) and its failure path share
    the queue and the outstanding permits."""
    if not calls:
        return set()
    events: queue.Queue = queue.Queue()
    refuse = threading.Event()
    concurrency = version_concurrency(version)

    async def send_all() -> None:
        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(concurrency)
        client = JudgeClient(
            base_url=version.base_url, model=version.model, params=version.params, sleep=sleep
        )

        async def one(index: int, call) -> None:
            async with gate:
                if refuse.is_set():
                    return
                future = loop.create_future()
                events.put((START, index, (loop, future)))
                if not await future:
                    return
                # told once the first request holds a limiter slot (``call_sending``)
                SEND_HOOK.set(lambda: events.put((SENDING, index, None)))
                reply = await client.complete(
                    messages=call.built.prompt.messages(), schema=call.built.schema
                )
                events.put((DONE, index, type(call)(built=call.built, reply=reply)))

        try:
            await asyncio.gather(*(one(i, c) for i, c in enumerate(calls)))
        finally:
            await client.aclose()

    def loop_thread() -> None:
        try:
            asyncio.run(send_all())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            events.put((FAILED, -1, exc))
        finally:
            events.put((END, -1, None))

    thread = threading.Thread(target=loop_thread, name="judge-calls", daemon=True)
    thread.start()
    sent: set[int] = set()
    stopped = False
    next_renewal = time.monotonic() + renew_every_s
    finished = False
    failure: BaseException | None = None
    batch: list = []
    answers: list[tuple[int, Any]] = []  # arrived, not yet recorded
    dirty = False  # permits granted since the last record
    recorded = 0
    flush_at = 0.0
    try:
        while not finished:
            batch = []
            deadlines = ([next_renewal] if renew else []) + ([flush_at] if answers or dirty else [])
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            with contextlib.suppress(queue.Empty):
                batch.append(events.get(timeout=timeout))
                while True:  # whatever else has arrived, without waiting
                    batch.append(events.get_nowait())
            finished = any(kind == END for kind, _, _ in batch)
            starts = [(i, handle) for kind, i, handle in batch if kind == START]
            if starts:
                ok = not stopped and (permit is None or permit([i for i, _ in starts]))
                if ok:
                    sent.update(i for i, _ in starts)
                    if not dirty and not answers:
                        flush_at = time.monotonic() + WRITE_WINDOW_S
                    dirty = True
                else:
                    stopped = True
                    refuse.set()
                for _, (loop, future) in starts:
                    loop.call_soon_threadsafe(_grant, future, ok)
            went = [i for kind, i, _ in batch if kind == SENDING]
            if went and sending is not None:
                sending(went)
                if not dirty and not answers:
                    flush_at = time.monotonic() + WRITE_WINDOW_S
                dirty = True
            arrived = [(i, call) for kind, i, call in batch if kind == DONE]
            if arrived and not answers and not dirty:
                flush_at = time.monotonic() + WRITE_WINDOW_S
            answers.extend(arrived)
            if (answers or dirty) and (finished or time.monotonic() >= flush_at):
                record(answers)
                recorded += len(answers)
                answers, dirty = [], False
            if renew and len(sent) > recorded and time.monotonic() >= next_renewal:
                renew()
                next_renewal = time.monotonic() + renew_every_s
            failure = next((p for kind, _, p in batch if kind == FAILED), failure)
    except BaseException:
        refuse.set()
        for kind, _, payload in batch:  # starts of the failing batch may not be answered yet
            if kind == START:
                loop, future = payload
                loop.call_soon_threadsafe(_grant, future, False)
        while not finished:  # refuse every pending start, wait for the calls in flight
            kind, _, payload = events.get()
            if kind == START:
                loop, future = payload
                loop.call_soon_threadsafe(_grant, future, False)
            finished = kind == END
        raise
    finally:
        thread.join()
    if failure is not None:
        raise failure
    return sent
