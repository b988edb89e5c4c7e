"""Pausing Python's cyclic garbage collector around a burst of allocations.

Reading a large run allocates tens of thousands of short-lived, acyclic tuples (cursor rows,
per-case rows). Each 700 allocations start a young-generation collection, and every few of
those an older one that walks every object the process holds (Django, numpy, the URL conf:
~150,000 objects), so at 2,000 cases × 5 trials about a third of the run report's CPU was
the collector finding nothing (``bench/README.md``, issue 17). Reference counting frees
these objects either way; the collector only finds cycles, and it runs again as usual when
the pause ends.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

_lock = threading.Lock()
_depth = 0
_was_enabled = False

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; safe to nest and to enter from several
    threads at once: it is enabled again when the last block still open exits, and only if
    it was enabled when the first one entered (a process that runs with the collector off
    keeps it off). Cycles made inside the block are collected after it."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


def gc_paused_call(func: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of ``gc_paused``: the whole call runs with the collector paused."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return func(*args, **kwargs)

    return wrapper
