"""A suite's pass rate over its runs: one mark per run (oldest left, evenly spaced in run
order, dated ticks), its 95% interval as a bar, the baseline ringed, imported runs hollow
diamonds, failed or cancelled runs red crosses, a run with nothing graded a grey tick on the
axis (a gap in the line, never bridged).

Reads the suite page's ``RunPoint``s (``evals.suites.suite_page_get``: at most
``HISTORY_RUNS`` = 50 runs, each pass rate the mean of per-case rates with the case-clustered
interval ``stats.intervals.clustered_rate_interval``, from one query per grader set whatever
the number of runs): nothing here queries or recomputes a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.templatetags.dashboard import percent, percent_interval
from evals.charts.svg import Label, Scale, labels_place
from evals.models import Run
from evals.run_status import run_status_shown
from evals.suites import RunPoint

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 48, 20, 24, 40
FONT = 11
Y_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_DATE_TICKS = 6

EXECUTED, IMPORTED, FAILED, UNFINISHED = "executed", "imported", "failed", "unfinished"


@dataclass(frozen=True)
class TrendMark:
    """One run: ``name``, ``uuid``, ``created`` ("2026-12-07 15:40"), ``status`` (its badge's
    label), ``kind`` (``EXECUTED``, ``IMPORTED``, ``FAILED`` for a failed or cancelled run,
    ``UNFINISHED`` while queued or running), ``rate``/``low``/``high`` in [0, 1] (None when
    nothing is graded), ``is_baseline``; pixels ``x``, ``y`` (None without a rate; the axis
    for the grey tick), ``y_low``, ``y_high``."""

    name: str
    uuid: str
    created: str
    status: str
    kind: str
    rate: float | None
    low: float | None
    high: float | None
    is_baseline: bool
    x: float
    y: float | None
    y_low: float | None
    y_high: float | None

    @property
    def text(self) -> str:
        """The mark's accessible name, as the table beside the chart says it."""
        what = (
            "nothing graded"
            if self.rate is None
            else f"pass rate {percent(self.rate)} {percent_interval(self.low, self.high)}"
        )
        baseline = ", the baseline" if self.is_baseline else ""
        return f"{self.name} ({self.created}, {self.status}{baseline}): {what}"

    @property
    def at(self) -> float:
        """The mark's y: its rate's, or just above the axis when nothing is graded."""
        return self.y if self.y is not None else HEIGHT - BOTTOM - 6

    @property
    def diamond(self) -> str:
        """An imported run's hollow diamond (SVG ``points``), 5 pixels each way."""
        x, y = self.x, self.at
        return f"{x - 5},{y} {x},{y - 5} {x + 5},{y} {x},{y + 5}"

    @property
    def cross(self) -> str:
        """A failed or cancelled run's cross (SVG path data), 4 pixels each way."""
        x, y = self.x, self.at
        return f"M{x - 4},{y - 4}L{x + 4},{y + 4}M{x - 4},{y + 4}L{x + 4},{y - 4}"


@dataclass(frozen=True)
class TrendChart:
    """``marks`` oldest first; ``line``: the polyline segments through consecutive runs with
    a rate (each an SVG ``points`` string); ``x_ticks``/``y_ticks`` as ``(pixel, label)``;
    ``baseline_label``: the "baseline" text placed to fit (None without a baseline drawn)."""

    marks: list[TrendMark]
    line: list[str]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    baseline_label: Label | None
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM

    @property
    def kinds(self) -> set[str]:
        return {m.kind for m in self.marks}


def _kind(run: Run) -> str:
    if run.status in (Run.Status.FAILED, Run.Status.CANCELLED):
        return FAILED
    if run.source == Run.Source.IMPORTED:
        return IMPORTED
    return EXECUTED if run.is_terminal else UNFINISHED


def trend_chart(points: Sequence[RunPoint], *, baseline_run_id: int | None) -> TrendChart:
    """The trend of ``points`` (oldest first, as ``SuitePage.runs``); ``baseline_run_id`` the
    current baseline's run (ringed when among them). No query."""
    n = len(points)
    x_of = Scale((0.0, max(n - 1, 1)), (LEFT + 8, WIDTH - RIGHT - 8))
    y_of = Scale((0.0, 1.0), (HEIGHT - BOTTOM, TOP))
    marks = []
    for i, p in enumerate(points):
        r = p.pass_rate
        marks.append(
            TrendMark(
                name=p.run.name,
                uuid=str(p.run.uuid),
                created=p.run.created_at.strftime("%Y-%m-%d %H:%M"),
                status=run_status_shown(p.run).label,
                kind=_kind(p.run),
                rate=r.mean,
                low=r.ci_low,
                high=r.ci_high,
                is_baseline=baseline_run_id is not None and p.run.id == baseline_run_id,
                x=x_of(i) if n > 1 else x_of(0.5),
                y=None if r.mean is None else y_of(r.mean),
                y_low=None if r.ci_low is None else y_of(r.ci_low),
                y_high=None if r.ci_high is None else y_of(r.ci_high),
            )
        )
    line: list[str] = []
    segment: list[str] = []
    for m in marks:
        if m.y is None:
            if len(segment) > 1:
                line.append(" ".join(segment))
            segment = []
        else:
            segment.append(f"{m.x},{m.y}")
    if len(segment) > 1:
        line.append(" ".join(segment))
    step = max(1, -(-n // MAX_DATE_TICKS))
    x_ticks = [(m.x, m.created[5:10]) for m in marks[::step]]
    baseline = next((m for m in marks if m.is_baseline), None)
    baseline_label = None
    if baseline is not None:
        anchor_y = baseline.y_high if baseline.y_high is not None else baseline.y
        y = (anchor_y if anchor_y is not None else HEIGHT - BOTTOM) - 6
        baseline_label = labels_place(
            [(baseline.x, y, "baseline")],
            bounds=(LEFT, 0, WIDTH - RIGHT, HEIGHT - BOTTOM),
            gap=2,
            font_size=FONT,
        )[0]
    return TrendChart(
        marks=marks,
        line=line,
        x_ticks=x_ticks,
        y_ticks=[(y_of(t), f"{round(t * 100)}%") for t in Y_TICKS],
        baseline_label=baseline_label,
    )
