"""The Pareto chart: quality against cost per trial, each point with its interval on both
axes, the front (points no other beats on both) joined and highlighted, the best set ringed,
labels placed to fit (``evals.charts.svg.labels_place``) and always in each mark's title.

``pareto_chart(points)`` takes the points as the caller computed them (which are on the front
and in the best set is the caller's rule, not redrawn here) and returns plain geometry that
``templates/evals/fragments/pareto_chart.html`` draws (the ``{% pareto_chart %}`` tag of
``evals.templatetags.charts``). Quality in [0, 1] is shown as a percentage; cost in USD."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

from core.money import usd_text
from core.templatetags.dashboard import percent, percent_interval
from evals.charts.svg import Label, Scale, labels_place, nice_step, nice_ticks

WIDTH, HEIGHT = 640, 380
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 48
FONT = 11
LABEL_MAX = 150


class ParetoPoint(NamedTuple):
    """One candidate: ``label`` (untrusted text), ``quality`` and its interval ``q_low``,
    ``q_high`` (a rate in [0, 1], or any score), ``cost`` per trial in USD and its interval
    ``c_low``, ``c_high``; ``on_front``, ``in_best_set``."""

    label: str
    quality: float
    q_low: float
    q_high: float
    cost: float | Decimal
    c_low: float | Decimal
    c_high: float | Decimal
    on_front: bool
    in_best_set: bool


@dataclass(frozen=True)
class ParetoMark:
    """A point drawn: the input ``point``; pixels ``x``, ``y`` and the interval bars'
    ``x_low``, ``x_high``, ``y_low``, ``y_high``; ``label`` placed (None when no free spot:
    the title still names it)."""

    point: ParetoPoint
    x: float
    y: float
    x_low: float
    x_high: float
    y_low: float
    y_high: float
    label: Label | None
    is_rate: bool = True

    @property
    def quality_text(self) -> str:
        """The quality and its interval ("83.3% [70.1%, 91.0%]")."""
        p = self.point
        return (
            f"{_quality_text(p.quality, self.is_rate)} "
            f"{_quality_interval(p.q_low, p.q_high, self.is_rate)}"
        )

    @property
    def cost_text(self) -> str:
        """The cost per trial and its interval ("$0.0021 [$0.0019, $0.0024]")."""
        p = self.point
        return (
            f"{usd_text(_decimal(p.cost))} [{usd_text(_decimal(p.c_low))}, "
            f"{usd_text(_decimal(p.c_high))}]"
        )

    @property
    def text(self) -> str:
        """The mark's accessible name: the numbers the table beside the chart shows."""
        p = self.point
        flags = (", on the front" if p.on_front else "") + (
            ", in the best set" if p.in_best_set else ""
        )
        return f"{p.label}: quality {self.quality_text}, cost per trial {self.cost_text}{flags}"


@dataclass(frozen=True)
class ParetoChart:
    """``marks`` in the input's order, ``front``: the SVG ``points`` of the line through the
    front's points by cost ("" with fewer than two), ticks as ``(pixel, label)``, ``is_rate``
    (quality shown as a percentage), the drawing's box."""

    marks: list[ParetoMark]
    front: str
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    is_rate: bool
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def _decimal(value: float | Decimal) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(repr(float(value)))


def _quality_text(value: float, is_rate: bool) -> str:
    return percent(value) if is_rate else f"{value:.3g}"


def _quality_interval(low: float, high: float, is_rate: bool) -> str:
    return percent_interval(low, high) if is_rate else f"[{low:.3g}, {high:.3g}]"


def _check(points: Sequence[ParetoPoint]) -> None:
    for i, p in enumerate(points):
        values = (p.quality, p.q_low, p.q_high, float(p.cost), float(p.c_low), float(p.c_high))
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"point {i} ({p.label!r}): a value is not finite")
        if not p.q_low <= p.quality <= p.q_high or not p.c_low <= p.cost <= p.c_high:
            raise ValueError(f"point {i} ({p.label!r}): the estimate is outside its interval")
        if p.c_low < 0:
            raise ValueError(f"point {i} ({p.label!r}): a cost is negative")


def pareto_chart(points: Iterable[ParetoPoint | tuple]) -> ParetoChart:
    """The chart of ``points`` (``ParetoPoint``s or 9-tuples in its order). The x axis runs
    from 0 (cost ratios read true) to the largest ``c_high`` (+10%); the y axis over the
    quality bounds' nice range, padded, as percentages within [0, 100%] when every quality
    bound is in [0, 1]. Labels are placed best set first, then the front, then the rest
    (``labels_place``), clear of the marks. Raises ``ValueError`` for a non-finite value, an
    estimate outside its interval or a negative cost."""
    pts = [p if isinstance(p, ParetoPoint) else ParetoPoint(*p) for p in points]
    _check(pts)
    is_rate = all(p.q_low >= 0 and p.q_high <= 1 for p in pts)
    top_cost = max((float(p.c_high) for p in pts), default=0.0)
    x_max = top_cost * 1.1 if top_cost > 0 else 1.0
    x_of = Scale((0.0, x_max), (LEFT, WIDTH - RIGHT))
    lows = [p.q_low for p in pts] or [0.0]
    highs = [p.q_high for p in pts] or [1.0]
    lo, hi = min(lows), max(highs)
    pad = max((hi - lo) * 0.08, 0.02 if is_rate else abs(hi) * 0.05 or 0.5)
    lo, hi = lo - pad, hi + pad
    if is_rate:
        lo, hi = max(0.0, lo), min(1.0, hi)
    step = nice_step(hi - lo, 5)
    y_lo, y_hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
    if is_rate:
        y_lo, y_hi = max(0.0, y_lo), min(1.0, y_hi)
    y_of = Scale((y_lo, y_hi), (HEIGHT - BOTTOM, TOP))
    geometry = [
        (
            x_of(float(p.cost)),
            y_of(p.quality),
            x_of(float(p.c_low)),
            x_of(float(p.c_high)),
            y_of(p.q_low),
            y_of(p.q_high),
        )
        for p in pts
    ]
    order = sorted(range(len(pts)), key=lambda i: (not pts[i].in_best_set, not pts[i].on_front))
    # Above-right of the mark, clear of its horizontal interval bar and of every mark.
    marks_boxes = [
        (x - r, y - r, x + r, y + r)
        for (x, y, *_), p in zip(geometry, pts, strict=True)
        for r in [10 if p.in_best_set else 6]
    ]
    placed = labels_place(
        [(geometry[i][0], geometry[i][1] - 6, pts[i].label) for i in order],
        bounds=(LEFT + 2, TOP, WIDTH - 2, HEIGHT - BOTTOM),
        gap=9,
        font_size=FONT,
        max_width=LABEL_MAX,
        avoid=marks_boxes,
    )
    labels: dict[int, Label | None] = dict(zip(order, placed, strict=True))
    marks = [
        ParetoMark(p, *geometry[i], label=labels[i], is_rate=is_rate) for i, p in enumerate(pts)
    ]
    front = sorted((m for m in marks if m.point.on_front), key=lambda m: (m.x, -m.y))
    x_ticks = (
        [(x_of(t), usd_text(_decimal(t))) for t in nice_ticks(0.0, x_max, 4) if t <= x_max]
        if top_cost > 0
        else []
    )
    y_ticks = [
        (y_of(t), f"{t * 100:g}%" if is_rate else f"{t:g}") for t in nice_ticks(y_lo, y_hi, 5)
    ]
    return ParetoChart(
        marks=marks,
        front=" ".join(f"{m.x},{m.y}" for m in front) if len(front) > 1 else "",
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        is_rate=is_rate,
    )
