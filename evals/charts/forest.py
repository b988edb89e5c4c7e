"""The forest plot of a comparison: each case's effect (head − base pass rate) with its
interval, sorted by effect, a zero line and the suite's delta as a summary diamond.

A case's interval is on its own trials, the cases held fixed
(``stats.compare.case_intervals_from_counts``: the MOVER of the two sides' Clopper–Pearson
limits, Newcombe 1998 method 10, united with Agresti–Caffo; ``within_case_interval`` on one
case), computed for every shared case graded on both sides at once (a few ms at 2,000). Only
the ``limit`` most-changed cases are drawn (largest |delta|, beyond noise first on a tie,
then key); the rest are counted: unchanged, changed within noise (the interval holds 0) and
changed beyond noise, and the full table holds them. The summary is the headline's
within-case interval (``Headline.bootstrap_low/high``), the same method over every shared
case. No query: everything comes from the ``Comparison``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evals.charts.svg import Scale, text_fit
from evals.comparison.compute import CaseComparison, Comparison
from evals.templatetags.comparison import points
from stats.compare import case_intervals_from_counts

FOREST_CASES = 40
WIDTH = 640
LABEL_W = 168  # the case keys' column
LEFT, RIGHT, TOP, BOTTOM = LABEL_W + 8, 24, 12, 40
ROW = 16
FONT = 11
X_TICKS = (-1.0, -0.5, 0.0, 0.5, 1.0)
TONE_COLOURS = {"worse": "#c0392b", "better": "#2b8a3e", "within": "#6b7482"}


@dataclass(frozen=True)
class ForestRow:
    """One drawn case: its counts, ``delta`` and interval (``low``, ``high``) in [−1, 1];
    ``label`` the key fitted to the label column; ``y`` the row's centre, ``x`` the delta's and
    ``x_low``/``x_high`` the interval's pixels; ``tone``: "worse" (interval below 0),
    "better" (above 0) or "within" (contains 0)."""

    key: str
    label: str
    base_passed: int
    base_graded: int
    head_passed: int
    head_graded: int
    delta: float
    low: float
    high: float
    y: float
    x: float
    x_low: float
    x_high: float
    tone: str

    @property
    def colour(self) -> str:
        """Red beyond noise below 0, green above, grey within noise."""
        return TONE_COLOURS[self.tone]

    @property
    def text(self) -> str:
        """The mark's accessible name: what the row of the table beside it says."""
        return (
            f"{self.key}: base {self.base_passed}/{self.base_graded}, head "
            f"{self.head_passed}/{self.head_graded}, effect {points(self.delta)}, interval "
            f"{points(self.low)} to {points(self.high)}"
        )


@dataclass(frozen=True)
class ForestSummary:
    """The suite's delta and interval as a diamond at row ``y``: ``diamond`` the polygon's
    points ("x,y x,y x,y x,y"), never narrower than 4 pixels."""

    delta: float
    low: float
    high: float
    n_cases: int
    y: float
    x: float
    x_low: float
    x_high: float
    diamond: str

    @property
    def text(self) -> str:
        return (
            f"All {self.n_cases} shared cases: effect {points(self.delta)}, interval "
            f"{points(self.low)} to {points(self.high)}"
        )


@dataclass(frozen=True)
class ForestChart:
    """The drawn ``rows`` (sorted by delta, most negative first), the ``summary`` (None without
    a headline), the cases not drawn counted: ``n_more`` = ``n_more_unchanged`` (delta 0) +
    ``n_more_within`` (changed, the interval holds 0) + ``n_more_beyond`` (changed, it does
    not); ``n_no_verdict`` (nothing graded on a side, never drawn); ticks as ``(pixel,
    label)``; ``confidence`` of every interval; the drawing's box."""

    rows: list[ForestRow]
    summary: ForestSummary | None
    n_more: int
    n_more_unchanged: int
    n_more_within: int
    n_more_beyond: int
    n_no_verdict: int
    ticks: list[tuple[float, str]]
    zero_x: float
    confidence: float
    height: int
    width: int = WIDTH
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    label_x: int = LABEL_W

    @property
    def bottom(self) -> int:
        return self.height - BOTTOM

    @property
    def confidence_text(self) -> str:
        return f"{self.confidence:.0%}"


def forest_chart(comparison: Comparison, *, limit: int = FOREST_CASES) -> ForestChart:
    """The forest plot of ``comparison`` with at most ``limit`` cases drawn (module docstring).
    Pixels: ``WIDTH`` wide, ``ROW`` per case, the x axis over [−1, 1] (−100 to +100 points)."""
    confidence = 1 - comparison.alpha
    graded = [c for c in comparison.cases if c.delta is not None]
    counts = np.array(
        [(c.base_graded, c.base_passed, c.head_graded, c.head_passed) for c in graded],
        dtype=np.int64,
    ).reshape(-1, 4)
    if len(graded):
        lows, highs = case_intervals_from_counts(*counts.T, confidence=confidence)
    else:
        lows = highs = np.zeros(0)
    interval = {
        c.key: (float(lo), float(hi)) for c, lo, hi in zip(graded, lows, highs, strict=True)
    }

    def beyond(c: CaseComparison) -> bool:
        low, high = interval[c.key]
        return low > 0 or high < 0

    changed = sorted(
        (c for c in graded if c.delta != 0),
        key=lambda c: (-abs(c.delta or 0.0), not beyond(c), c.key),
    )
    shown = sorted(changed[:limit], key=lambda c: (c.delta, c.key))
    hidden = changed[limit:]
    n_more_beyond = sum(1 for c in hidden if beyond(c))
    n_more_within = len(hidden) - n_more_beyond
    n_more_unchanged = len(graded) - len(changed)
    n_rows = len(shown) + (2 if comparison.headline is not None else 0)
    height = TOP + max(n_rows, 1) * ROW + BOTTOM
    x_of = Scale((-1.0, 1.0), (LEFT, WIDTH - RIGHT))
    rows = []
    for i, case in enumerate(shown):
        low, high = interval[case.key]
        delta = float(case.delta or 0.0)
        rows.append(
            ForestRow(
                key=case.key,
                label=text_fit(case.key, LABEL_W - 4, FONT),
                base_passed=case.base_passed,
                base_graded=case.base_graded,
                head_passed=case.head_passed,
                head_graded=case.head_graded,
                delta=delta,
                low=low,
                high=high,
                y=TOP + i * ROW + ROW / 2,
                x=x_of(delta),
                x_low=x_of(low),
                x_high=x_of(high),
                tone="worse" if high < 0 else "better" if low > 0 else "within",
            )
        )
    summary = None
    h = comparison.headline
    if h is not None:
        y = TOP + (len(shown) + 1) * ROW + ROW / 2
        x, x_low, x_high = x_of(h.delta), x_of(h.bootstrap_low), x_of(h.bootstrap_high)
        x_low, x_high = min(x_low, x - 2), max(x_high, x + 2)
        half = ROW * 0.4
        summary = ForestSummary(
            delta=h.delta,
            low=h.bootstrap_low,
            high=h.bootstrap_high,
            n_cases=h.n_cases,
            y=y,
            x=x,
            x_low=x_low,
            x_high=x_high,
            diamond=f"{x_low},{y} {x},{y - half} {x_high},{y} {x},{y + half}",
        )
    return ForestChart(
        rows=rows,
        summary=summary,
        n_more=len(hidden) + n_more_unchanged,
        n_more_unchanged=n_more_unchanged,
        n_more_within=n_more_within,
        n_more_beyond=n_more_beyond,
        n_no_verdict=len(comparison.cases) - len(graded),
        ticks=[(x_of(t), points(t).removesuffix(" pts").removesuffix(".0")) for t in X_TICKS],
        zero_x=x_of(0.0),
        confidence=confidence,
        height=height,
    )
