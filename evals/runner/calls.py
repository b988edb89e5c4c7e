"""The call pool: target calls on an asyncio loop in a helper thread, fed and drained by the
chunk's thread (the one holding the database connection).

At most ``concurrency`` calls are in flight; a target that raises gives an errored result,
never a lost trial. ``withdraw`` takes back every trial not yet started, so a cancel or a
lost database stops spending at once; a call waiting to retry is told by ``stop`` to make no
further attempt (``providers.call_stop``, error kind ``cancelled``). A call waiting for the
shared limiter (``providers.limiter``) stays withdrawable until it reports sending."""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
from typing import Any

from core.logs import log_trial_set
from evals.runner.targets import CaseInput, TargetResult, target_from_config
from providers.call_stop import CALL_STOP
from providers.limiter import SEND_HOOK

# How long a batch of results may gather before it is handed over, in seconds (the chunk
# looks at its run, cancelled?, with every batch, and writes every ``WRITE_EVERY_S``). A batch
# is handed over at once when no call is left that could join it (the end of a chunk, or of
# the run).
WRITE_BATCH_WINDOW_S = 0.05


class CallPool:
    """Target calls for one chunk; a context manager, thread-safe for one consuming thread."""

    def __init__(self, config: dict) -> None:
        self._config = config
        self._results: queue.Queue = queue.Queue()
        # Set by the loop thread when no call is outstanding (or it failed): ``results``
        # sleeps through its gathering window on it instead of waking for every result.
        self._quiet = threading.Event()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._submitted = 0  # counted by the consuming thread
        self._settled = 0  # calls returned (loop thread) or withdrawn (consuming thread)
        self._waiting: dict[int, asyncio.Task] = {}  # withdrawable calls not yet sending
        self._cancelled: set[int] = set()  # ... and those withdrawn while waiting
        self._stops: dict[int, asyncio.Event] = {}  # calls started -> their CALL_STOP event
        self.concurrency = 1
        # The loop thread runs in a copy of the creator's context: its logs carry the run id
        # (core.logs.log_context around the chunk), each call's its trial id.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._run,),
            name="assay-target-calls",
            daemon=True,
        )

    # -- the loop thread ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
            self._error = exc
            self._results.put(exc)
            self._quiet.set()
        finally:
            self._ready.set()

    async def _main(self) -> None:
        target = target_from_config(self._config)
        try:
            self.concurrency = target.concurrency
            self._loop = asyncio.get_running_loop()
            self._inbox = asyncio.Queue()
            self._ready.set()
            await asyncio.gather(*(self._worker(target) for _ in range(self.concurrency)))
        finally:
            await target.aclose()

    async def _worker(self, target: Any) -> None:
        assert self._inbox is not None
        while True:
            item = await self._inbox.get()
            if item is None:
                return
            trial_id, case_input = item
            # This worker's context (copied into a withdrawable call's task) carries the
            # call's stop event: ``stop`` sets it.
            self._stops[trial_id] = stop = asyncio.Event()
            CALL_STOP.set(stop)
            log_trial_set(trial_id)
            try:
                if getattr(target, "withdrawable", False):
                    result = await self._withdrawable_call(target, trial_id, case_input)
                    if result is None:
                        continue  # withdrawn while waiting: counted by ``_drain``
                else:
                    result = await target.call(case_input)
            except Exception as exc:  # noqa: BLE001 - the contract says never raise
                result = TargetResult(output="", error=f"target raised {type(exc).__name__}: {exc}")
            finally:
                self._stops.pop(trial_id, None)
            self._settled += 1  # only this loop's thread and ``withdraw`` (on it) write it
            self._results.put((trial_id, result))
            if self.outstanding == 0:
                self._quiet.set()

    async def _withdrawable_call(
        self, target: Any, trial_id: int, case_input: CaseInput
    ) -> TargetResult | None:
        """``target.call`` as a task ``_drain`` may cancel until it reports sending."""
        context = contextvars.copy_context()

        def sending() -> None:
            self._waiting.pop(trial_id, None)

        context.run(SEND_HOOK.set, sending)
        task = asyncio.get_running_loop().create_task(target.call(case_input), context=context)
        self._waiting[trial_id] = task
        try:
            return await task
        except asyncio.CancelledError:
            if trial_id in self._cancelled and task.cancelled():
                self._cancelled.discard(trial_id)
                return None
            raise
        finally:
            self._waiting.pop(trial_id, None)

    async def _drain(self) -> list[int]:
        assert self._inbox is not None
        withdrawn = []
        while not self._inbox.empty():
            item = self._inbox.get_nowait()
            if item is not None:
                withdrawn.append(item[0])
        for trial_id, task in list(self._waiting.items()):
            if task.cancel():  # False: it has already ended, its result is on the way
                del self._waiting[trial_id]
                self._cancelled.add(trial_id)
                withdrawn.append(trial_id)
        self._settled += len(withdrawn)
        return withdrawn

    def _stop(self, trial_ids: list[int]) -> list[int]:
        stopped = []
        for trial_id in trial_ids:
            event = self._stops.get(trial_id)
            if event is not None:
                event.set()
                stopped.append(trial_id)
        return stopped

    # -- the consuming thread -----------------------------------------------------------

    def __enter__(self) -> CallPool:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def submit(self, items: list[tuple[int, CaseInput]]) -> None:
        """Queue calls for ``(trial_id, case_input)`` pairs; they start as slots free up."""
        assert self._loop is not None and self._inbox is not None
        self._submitted += len(items)
        # One hand-over for the lot (each ``call_soon_threadsafe`` wakes the loop).
        self._loop.call_soon_threadsafe(self._inbox_put, list(items))

    def _inbox_put(self, items: list[tuple[int, CaseInput]]) -> None:
        assert self._inbox is not None
        for item in items:
            self._inbox.put_nowait(item)

    @property
    def outstanding(self) -> int:
        """Calls submitted and not yet returned or withdrawn (in flight or waiting for a slot)."""
        return self._submitted - self._settled

    def withdraw(self) -> list[int]:
        """Take back every submitted trial not yet started; returns their ids."""
        if self._loop is None or self._closed or not self._thread.is_alive():
            return []
        return asyncio.run_coroutine_threadsafe(self._drain(), self._loop).result()

    def stop(self, trial_ids: list[int]) -> list[int]:
        """Tell the calls of ``trial_ids`` in flight to make no further attempt: one between
        attempts ends at once (``cancelled``), one mid-attempt when it ends. Returns the ids told.
        """
        if self._loop is None or self._closed or not self._thread.is_alive():
            return []
        return self._loop_run(self._stop, trial_ids)

    def _loop_run(self, function, *args):
        async def on_loop():
            return function(*args)

        return asyncio.run_coroutine_threadsafe(on_loop(), self._loop).result()

    def results(self, timeout: float) -> list[tuple[int, TargetResult]]:
        """The results arriving within ``timeout`` seconds (empty when none), gathered for
        ``WRITE_BATCH_WINDOW_S`` after the first. Raises what the loop thread raised."""
        try:
            item = self._results.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return []
        window_ends = time.monotonic() + WRITE_BATCH_WINDOW_S
        # The window is slept through, woken early only when no call is left that could join
        # the batch (``_quiet``): taking each result as it came woke this thread, a thread
        # switch and a hand-over of the GIL, for every trial.
        self._quiet.clear()  # before the check: a set() after it is not lost
        if self.outstanding > 0 and not isinstance(item, BaseException):
            self._quiet.wait(max(0.0, window_ends - time.monotonic()))
        batch: list[tuple[int, TargetResult]] = []
        while True:
            if isinstance(item, BaseException):
                raise item
            batch.append(item)
            try:
                item = self._results.get_nowait()
            except queue.Empty:
                return batch

    def close(self) -> list[tuple[int, TargetResult]]:
        """Let submitted calls finish, stop the loop, and return the results not yet read."""
        loop, inbox = self._loop, self._inbox
        if not self._closed and loop is not None and inbox is not None and self._thread.is_alive():
            for _ in range(self.concurrency):
                loop.call_soon_threadsafe(inbox.put_nowait, None)
        self._closed = True
        self._thread.join()
        rest: list[tuple[int, TargetResult]] = []
        while True:
            try:
                item = self._results.get_nowait()
            except queue.Empty:
                return rest
            if not isinstance(item, BaseException):
                rest.append(item)
