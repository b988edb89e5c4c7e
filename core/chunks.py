"""Cutting a list into chunks: the one helper every task fan-out and batch write uses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def chunked(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in consecutive lists of ``size`` (the last shorter). Raises ``ValueError``
    unless ``size`` is a positive integer."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"chunk size must be a positive integer, got {size!r}")
    return [list(items[i : i + size]) for i in range(0, len(items), size)]
