"""Rendering the grid of runs' cells (``evals.grid.build``). A grid holds up to 20 × several
thousand cells, so a row's cells are written here in one pass rather than through a template
per cell; every dynamic value is escaped (``format_html``)."""

from __future__ import annotations

import math

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.templatetags.dashboard import percent, percent_interval

register = template.Library()

STEPS = 20  # the interval mark's resolution: 5% steps (CSS classes l0..l19 and w1..w20)
NO_UUID = "00000000-0000-0000-0000-000000000000"
ABSENT = mark_safe('<td class="cell absent" title="not in this run">—</td>')
HIDDEN = mark_safe('<td class="cell hidden" title="hidden while you label">hidden</td>')


def mark_classes(low: float, high: float) -> str:
    """CSS classes placing an interval [low, high] (fractions) on a 20-step bar: the mark
    starts at floor(low·20) and is at least one step wide (never of zero width)."""
    start = min(STEPS - 1, max(0, math.floor(low * STEPS)))
    end = max(start + 1, min(STEPS, math.ceil(high * STEPS)))
    return f"l{start} w{end - start}"


@register.simple_tag
def grid_cells(row, case_urls: list[str]) -> SafeString:
    """The ``<td>`` cells of one grid row: "—" where the case was not in the run, "hidden"
    where it is blind for the viewer, else the rate with its interval mark (title: counts and
    the 95% interval) linking to the case's trials in that run (``case_urls``: one
    ``column_case_url`` per column)."""
    out = []
    for cell, case_url in zip(row.cells, case_urls, strict=True):
        if cell is None:
            out.append(ABSENT)
            continue
        if cell.hidden:
            out.append(HIDDEN)
            continue
        href = case_url.replace(NO_UUID, row.case_uuid)
        if cell.rate is None:
            out.append(
                format_html(
                    '<td class="cell ungraded"><a href="{}" '
                    'title="{} trials, none graded ({} errored)">n/a</a></td>',
                    href,
                    cell.trials,
                    cell.errored,
                )
            )
            continue
        interval = percent_interval(cell.low, cell.high)
        out.append(
            format_html(
                '<td class="cell{}"><a href="{}" title="{}/{} passed: {} {}{}">'
                '<span class="rate">{}</span>'
                '<span class="ci-bar"><span class="ci-mark {}"></span></span>'
                "</a></td>",
                " flaky" if cell.flaky else "",
                href,
                cell.passed,
                cell.graded,
                percent(cell.rate),
                interval,
                f"; {cell.errored} errored left out" if cell.errored else "",
                f"{round(cell.rate * 100)}%",
                mark_classes(cell.low, cell.high),
            )
        )
    return format_html_join("", "{}", ((c,) for c in out))


def column_case_url(run_uuid: str) -> str:
    """The run-case URL of a run with a placeholder case id (filled per cell)."""
    return reverse("evals:run-case", kwargs={"run_id": run_uuid, "case_id": NO_UUID})
