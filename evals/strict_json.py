"""Strict JSON for every report, comparison and export: no NaN or Infinity, ever.

Fault C1 in shared/acceptance/faults.md: a non-finite number is "missing", so it becomes
null here, and callers dump with ``allow_nan=False``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np


def json_safe(value: Any) -> Any:
    """``value`` with dict keys as strings, tuples as lists, non-finite floats and Decimals
    as None, finite Decimals as strings (exact USD amounts), numpy scalars as Python ones."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else None
    return value
