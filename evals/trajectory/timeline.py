"""A trajectory as the trial page shows it: one row per step, large content folded.

Pure: ``trajectory_timeline(steps)`` makes rows of plain text the template escapes (model
output and tool results are untrusted; nothing is marked safe). Non-string content is shown
as indented JSON; content over ``FOLD_CHARS`` or ``FOLD_LINES`` is folded with a preview, and
over ``SHOW_CHARS`` cut on the page, saying how much more (the API holds all of it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evals.trajectory.steps import TrajectoryTotals, trajectory_totals

FOLD_CHARS = 2_000  # content longer than this is folded
FOLD_LINES = 30  # ... or with more lines than this
PREVIEW_CHARS = 240  # what a folded step shows before it is opened
SHOW_CHARS = 100_000  # what the page shows of one step at most (a 200 KB result: half)


@dataclass(frozen=True)
class TimelineStep:
    """One row: ``number`` (1-based), ``kind``, ``label`` (role or tool name), ``call_id``,
    ``status`` (tool results only), ``text`` (at most ``SHOW_CHARS``), ``size_bytes`` (UTF-8),
    ``folded``, ``preview``, ``cut_chars``, and the step's tokens, ``latency_ms`` and
    ``cost_usd`` (None when unknown)."""

    number: int
    kind: str
    label: str
    call_id: str
    status: str
    text: str
    size_bytes: int
    folded: bool
    preview: str
    cut_chars: int
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: float | None
    cost_usd: float | None

    @property
    def size(self) -> str:
        """The content's size for people (``size_text``)."""
        return size_text(self.size_bytes)

    @property
    def has_metrics(self) -> bool:
        """True when the step states any of its figures."""
        return any(
            v is not None
            for v in (self.input_tokens, self.output_tokens, self.latency_ms, self.cost_usd)
        )


@dataclass(frozen=True)
class Timeline:
    """A trial's rows and totals; ``latency_ms`` sums the steps stating one (None when none)."""

    steps: list[TimelineStep]
    totals: TrajectoryTotals
    latency_ms: float | None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _row(number: int, step: dict) -> TimelineStep:
    kind = step.get("kind", "")
    if kind == "tool_call":
        label, content = step.get("name", ""), step.get("arguments", {})
    elif kind == "tool_result":
        label, content = step.get("name") or "result", step.get("content", "")
    else:
        label, content = step.get("role", "assistant"), step.get("content", "")
    text = _as_text(content)
    folded = len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    shown = text[:SHOW_CHARS]
    return TimelineStep(
        number=number,
        kind=kind,
        label=str(label),
        call_id=str(step.get("id") or ""),
        status=step.get("status", "") if kind == "tool_result" else "",
        text=shown,
        size_bytes=len(text.encode("utf-8", "surrogatepass")),
        folded=folded,
        preview=text[:PREVIEW_CHARS] if folded else "",
        cut_chars=len(text) - len(shown),
        input_tokens=step.get("input_tokens"),
        output_tokens=step.get("output_tokens"),
        latency_ms=step.get("latency_ms"),
        cost_usd=step.get("cost_usd"),
    )


def trajectory_timeline(steps: list[dict] | None) -> Timeline | None:
    """The rows of a stored trajectory; None for a trial without one."""
    if steps is None:
        return None
    latencies = [s["latency_ms"] for s in steps if s.get("latency_ms") is not None]
    return Timeline(
        steps=[_row(i, step) for i, step in enumerate(steps, start=1)],
        totals=trajectory_totals(steps),
        latency_ms=sum(latencies) if latencies else None,
    )


def size_text(size_bytes: int) -> str:
    """Bytes for people: "812 B", "4.2 KB", "1.3 MB" (1 KB = 1,000 B)."""
    if size_bytes < 1_000:
        return f"{size_bytes} B"
    if size_bytes < 1_000_000:
        return f"{size_bytes / 1_000:.1f} KB"
    return f"{size_bytes / 1_000_000:.1f} MB"
