"""Deterministic graders: the cheap rungs of the grader ladder.

Contract:
- A grader set is a list of ``GraderSpec`` parsed once at the edge from JSON
  (``parse_grader_specs``), then passed around typed.
- ``run_grader(spec, case=..., output=...)`` never raises: a grader that raises gives an
  errored ``GradeResult`` (``passed=None``), never a fail counted as data, never a pass.
- Every result carries a reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class GraderConfigError(ValueError):
    """A grader spec is invalid; the message names the index and field."""


@dataclass(frozen=True)
class GraderSpec:
    """One grader in a run's grader set.

    ``key``: unique within the set, stored as ``Grade.grader``; ``kind``: a name in
    ``GRADERS``; ``config``: kind-specific options; ``gating``: whether the overall verdict
    of a trial requires this grader to pass.
    """

    key: str
    kind: str
    config: dict = field(default_factory=dict)
    gating: bool = True
    version: str = "1"


@dataclass(frozen=True)
class GradeResult:
    """A grader's output: ``passed`` (None when errored), ``score`` in [0, 1] or None,
    ``reason`` (always non-empty), ``status`` "ok" or "error", ``details`` JSON-safe."""

    passed: bool | None
    reason: str
    score: float | None = None
    status: str = "ok"
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, reason: str, **details: Any) -> GradeResult:
        return cls(passed=None, score=None, reason=reason, status="error", details=details)


# kind -> function(config: dict, case: CaseInput-like, output: str) -> GradeResult
GRADERS: dict[str, Callable[..., GradeResult]] = {}
