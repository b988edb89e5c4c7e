"""The suite's cost–quality chart: each run at (cost per trial, pass rate) with the pass rate's
95% interval, the baseline marked, as server-rendered SVG (no script). A run of unknown cost,
with nothing graded, or blind for the viewer is listed under the chart with the reason."""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal

from django.template.loader import render_to_string

from core.money import usd_text
from evals.baselines import baseline_current
from evals.blindness import blind_for
from evals.charts.svg import Label, labels_place
from evals.models import Run, Suite, Trial
from evals.selectors import run_list_stats

CHART_RUNS = 50
WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 16, 48
X_TICKS = 4
LABEL_FONT = 11.5  # the labels are 11 px; bold (the baseline) runs about 5% wider


@dataclass(frozen=True)
class ChartPoint:
    """One run: name, cost per trial (USD), pass rate and interval, baseline, SVG pixel position."""

    run_uuid: str
    run_name: str
    cost_per_trial_usd: Decimal
    rate: float
    low: float
    high: float
    is_baseline: bool
    x: float
    y: float
    y_low: float
    y_high: float
    label: Label | None = None  # placed inside the drawing (``labels_place``); None: no room

    @property
    def title(self) -> str:
        return (
            f"{self.run_name}: pass rate {self.rate * 100:.1f}% "
            f"[{self.low * 100:.1f}%, {self.high * 100:.1f}%] at "
            f"{usd_text(self.cost_per_trial_usd)} per trial"
        )


@dataclass(frozen=True)
class CostQualityChart:
    """``points`` (runs with a known cost per trial and a pass rate), ``left_out`` runs as
    ``(run name, reason)``, axis ticks ``x_ticks``/``y_ticks`` as ``(pixel, label)``, and the
    plot area's corners."""

    suite_name: str
    points: list[ChartPoint]
    left_out: list[tuple[str, str]]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def _y(rate: float) -> float:
    return round(TOP + (1 - rate) * (HEIGHT - TOP - BOTTOM), 1)


def cost_quality_chart_get(*, suite: Suite, viewer, limit: int = CHART_RUNS) -> CostQualityChart:
    """The chart of ``suite``'s newest ``limit`` runs for ``viewer``. A fixed number of queries."""
    runs = list(Run.objects.filter(suite=suite).order_by("-created_at", "-id")[:limit])
    baseline = baseline_current(suite=suite)
    blind = blind_for(viewer)
    blind_runs = (
        set(
            Trial.objects.filter(blind.trials_q(), run__in=runs)
            .order_by()
            .values_list("run_id", flat=True)
            .distinct()
        )
        if blind
        else set()
    )
    stats = run_list_stats(runs=runs) if runs else {}
    # (run, cost per trial, pass rate, its 95% interval's low and high)
    usable: list[tuple[Run, Decimal, float, float, float]] = []
    left_out = []
    for run in reversed(runs):
        if run.id in blind_runs:
            left_out.append((run.name, "hidden while you label"))
            continue
        s = stats.get(run.id)
        q = s.quality if s is not None else None
        if q is None or q.pass_rate is None:
            left_out.append((run.name, "nothing graded"))
        elif q.cost_per_trial_usd is None:
            left_out.append((run.name, q.note or "cost unknown"))
        else:
            # run_list_stats: the interval is None only with the pass rate (no case graded)
            assert q.pass_rate_low is not None and q.pass_rate_high is not None
            usable.append(
                (run, q.cost_per_trial_usd, q.pass_rate, q.pass_rate_low, q.pass_rate_high)
            )
    top = max((cost for _, cost, *_ in usable), default=Decimal(0))
    span = float(top) * 1.1 if top else 1.0
    plot_w = WIDTH - LEFT - RIGHT

    def x_of(cost: Decimal) -> float:
        return round(LEFT + float(cost) / span * plot_w, 1)

    points = [
        ChartPoint(
            run_uuid=str(run.uuid),
            run_name=run.name,
            cost_per_trial_usd=cost,
            rate=rate,
            low=low,
            high=high,
            is_baseline=baseline is not None and baseline.run_id == run.id,
            x=x_of(cost),
            y=_y(rate),
            y_low=_y(low),
            y_high=_y(high),
        )
        for run, cost, rate, low, high in usable
    ]
    points = _labelled(points)
    x_ticks = (
        [
            (round(LEFT + i / X_TICKS * plot_w, 1), usd_text(Decimal(repr(span * i / X_TICKS))))
            for i in range(X_TICKS + 1)
        ]
        if usable
        else []
    )
    y_ticks = [(_y(r), f"{round(r * 100)}%") for r in (0, 0.25, 0.5, 0.75, 1)]
    return CostQualityChart(
        suite_name=suite.name, points=points, left_out=left_out, x_ticks=x_ticks, y_ticks=y_ticks
    )


def _labelled(points: list[ChartPoint]) -> list[ChartPoint]:
    """``points`` with their labels ("baseline: <name>" for the baseline, placed first),
    flipped to the left of a mark near the right edge, cut to fit, never overlapping."""
    order = sorted(range(len(points)), key=lambda i: not points[i].is_baseline)
    marks = [
        (
            points[i].x,
            points[i].y + (-8 if points[i].is_baseline else 4),
            f"baseline: {points[i].run_name}" if points[i].is_baseline else points[i].run_name,
        )
        for i in order
    ]
    placed = labels_place(
        marks,
        bounds=(LEFT + 2, TOP, WIDTH - 2, HEIGHT - BOTTOM),
        gap=9,
        max_width=220,  # about 34 characters, as the labels were before
        font_size=LABEL_FONT,
        avoid=[(p.x - 6, p.y - 6, p.x + 6, p.y + 6) for p in points],
    )
    labels = dict(zip(order, placed, strict=True))
    return [replace(p, label=labels[i]) for i, p in enumerate(points)]


def cost_quality_svg(chart: CostQualityChart) -> str:
    """``chart`` as an SVG document, autoescaped (run names cannot inject markup)."""
    return render_to_string("evals/cost_quality_chart.svg", {"chart": chart})
