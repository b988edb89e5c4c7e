"""What an agent grader reads of a trial besides its output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AgentData:
    """A trial's ``trajectory`` (``evals.trajectory.steps``) and ``final_state``; None when none."""

    trajectory: list[dict] | None
    final_state: Any


@dataclass(frozen=True)
class AgentOutcome:
    """An agent grader's answer before it becomes a ``GradeResult``: ``passed`` (None: the
    grader cannot judge, an errored grade), ``reason`` (never empty), ``details`` (JSON-safe;
    ``group``: the reason without trial-specific values, so the report can group trials)."""

    passed: bool | None
    reason: str
    details: dict[str, Any]
