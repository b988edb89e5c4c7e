"""Pausing the cyclic collector around bursts of acyclic allocations (reading a large run;
bench/README.md). Reference counting still frees them."""

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
    """Disable the cyclic collector for the block. Nestable and thread-safe: re-enabled when the
    last open block exits, only if it was enabled when the first entered."""
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
