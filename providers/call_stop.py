"""Stopping a call between two HTTP attempts (a back-off, a wait for the limiter) when its run
is cancelled: the call pool sets the call's ``CALL_STOP`` event, and the client makes no
new attempt and ends with ``CANCELLED_KIND`` (stored as cancelled). An attempt in flight
finishes. A call outside a pool has no event."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

# The ``error_kind`` of a call stopped before an attempt (``TargetResult.error_kind``).
CANCELLED_KIND = "cancelled"

CALL_STOP: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar(
    "assay_call_stop", default=None
)


def call_stopped() -> bool:
    """Whether this call has been told to make no further attempt."""
    event = CALL_STOP.get()
    return event is not None and event.is_set()


class Stopped(Exception):
    """Stopped while waiting; ``value``: the wait's result when it finished as the stop came (a
    limiter slot to give back), else None."""

    def __init__(self, value: Any = None) -> None:
        super().__init__("call stopped")
        self.value = value


async def unless_stopped(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` unless the call is stopped first: then cancel it and raise ``Stopped``
    (at once when already stopped). Without a stop event, a plain ``await``."""
    event = CALL_STOP.get()
    if event is None:
        return await awaitable
    if event.is_set():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # never started: nothing to take back
        raise Stopped()
    waiting = asyncio.ensure_future(awaitable)
    stop = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiting, stop}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        waiting.cancel()
        stop.cancel()
        raise
    if waiting.done():
        stop.cancel()
        return waiting.result()
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        value = await waiting
        raise Stopped(value)  # it finished before the cancel took: hand it back
    raise Stopped()
