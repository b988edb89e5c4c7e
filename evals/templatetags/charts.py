"""``{% pareto_chart points chart_id="pareto" title="..." %}``: the Pareto chart of
``evals.charts.pareto.pareto_chart`` drawn by ``templates/evals/fragments/pareto_chart.html``
with its table of numbers. ``chart_id`` keeps the ids unique when a page has several."""

from __future__ import annotations

from django import template

from evals.charts.pareto import pareto_chart as pareto_geometry

register = template.Library()


@register.inclusion_tag("evals/fragments/pareto_chart.html")
def pareto_chart(
    points, chart_id: str = "pareto", title: str = "Quality against cost per trial"
) -> dict:
    """The fragment's context: ``chart`` (a ``ParetoChart``), ``chart_id``, ``title``. Raises
    ``ValueError`` as ``pareto_chart`` for a malformed point."""
    return {"chart": pareto_geometry(points), "chart_id": chart_id, "title": title}
