"""Rendering the grid of runs' rows (``evals.grid.build``) in one pass with plain string
formatting: a template per cell was most of the page's time at 20,000 cells. User text
(case keys, tags) goes through ``html.escape``; every other value is a number or a fixed
string of this module."""

from __future__ import annotations

import math
from functools import lru_cache
from html import escape

from django import template
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from core.templatetags.dashboard import percent_interval

register = template.Library()

STEPS = 20  # the interval mark's resolution: 5% steps (CSS classes l0..l19 and w1..w20)
NO_UUID = "00000000-0000-0000-0000-000000000000"
ABSENT = '<td class="cell absent" title="not in this run">—</td>'
HIDDEN = '<td class="cell hidden" title="hidden while you label">hidden</td>'


def mark_classes(low: float, high: float) -> str:
    """CSS classes placing an interval [low, high] (fractions) on a 20-step bar: the mark
    starts at floor(low·20) and is at least one step wide (never of zero width)."""
    start = min(STEPS - 1, max(0, math.floor(low * STEPS)))
    end = max(start + 1, min(STEPS, math.ceil(high * STEPS)))
    return f"l{start} w{end - start}"


@lru_cache(maxsize=4096)
def cell_html(cell) -> str:
    """One ``<td>``: "—" (not in the run), "hidden" (blind), "n/a" (nothing graded), else the rate
    with its interval mark. Memoized: a grid's cells take few distinct values."""
    if cell is None:
        return ABSENT
    if cell.hidden:
        return HIDDEN
    if cell.rate is None:
        return (
            f'<td class="cell ungraded" title="{cell.trials} trials, none graded '
            f'({cell.errored} errored)">n/a</td>'
        )
    errored = f"; {cell.errored} errored left out" if cell.errored else ""
    return (
        f'<td class="cell{" flaky" if cell.flaky else ""}" title="{cell.passed}/{cell.graded} '
        f'passed, 95% CI {percent_interval(cell.low, cell.high)}{errored}">'
        f"{round(cell.rate * 100)}%"
        f'<i class="ci-bar"><i class="ci-mark {mark_classes(cell.low, cell.high)}"></i></i></td>'
    )


@register.simple_tag
def grid_rows(grid) -> SafeString:
    """Every ``<tr>`` of ``grid``: the case, its variance and change, one cell per run."""
    history = reverse(
        "evals:case-history", kwargs={"suite_id": grid.suite_uuid, "case_id": NO_UUID}
    )
    out = []
    for row in grid.rows:
        tags = "".join(f' <span class="tag">{escape(t)}</span>' for t in row.tags)
        variance = "—" if row.variance is None else f"{row.variance:.3f}"
        flaky = ' class="flaky-row"' if row.flaky_any else ""
        out.append(
            f'<tr{flaky} data-case="{escape(row.key)}">'
            f'<td><a class="case-history" href="{history.replace(NO_UUID, row.case_uuid)}">'
            f"{escape(row.key)}</a>{tags}</td>"
            f'<td class="num">{variance}</td><td class="change">{escape(row.change)}</td>'
            + "".join(cell_html(c) for c in row.cells)
            + "</tr>"
        )
    return mark_safe("".join(out))  # user text escaped above; the rest is ours
