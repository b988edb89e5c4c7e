"""Stopping a call that is between two of its HTTP attempts (a retry's back-off, a wait for
the shared limiter): the call pool (``evals.runner.calls``) gives each call an
``asyncio.Event`` through ``CALL_STOP``; the chunk sets it when the call's run (or the
top-up it serves) is cancelled. A target that retries checks it before every attempt and
wakes from its waits when it is set, so a cancelled run makes no new attempt: an attempt in
flight finishes (its answer is recorded, paid once), and a call that would have tried again
ends at once with ``CANCELLED_KIND`` (the runner stores that trial as cancelled, never as an
error or a pass).

A call outside a pool (a judge batch, a test calling a target directly) has no event: it is
never stopped this way.
"""

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
    """The call was stopped while waiting (``unless_stopped``); ``value`` is what the wait
    returned anyway when it finished as the stop came (a limiter slot to give back), else
    None."""

    def __init__(self, value: Any = None) -> None:
        super().__init__("call stopped")
        self.value = value


async def unless_stopped(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` unless this call is stopped first: then the wait is cancelled
    and ``Stopped`` raised (carrying the wait's result when it finished in the same instant,
    so the caller can give back what it took). Without a stop event, a plain ``await``.
    Raises ``Stopped`` at once when the call is already stopped."""
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
