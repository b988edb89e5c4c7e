"""HTML views of the grid of runs and a case's history (``evals.grid``), and the suite's
cost–quality chart (``evals.grid.chart``). Reviewers, engineers and leads may view; what a
reviewer still labeling may not see is withheld by the selectors (``evals.blindness``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from core.errors import DomainError
from core.http import VIEWER_ROLES, role_required
from evals.grid.build import GRID_CHANGES, MAX_RUNS, SORTS, GridQuery, grid_get, grid_run_choices
from evals.grid.chart import cost_quality_chart_get, cost_quality_svg
from evals.grid.history import case_history_get
from evals.models import Case, Suite


@require_GET
@role_required(*VIEWER_ROLES)
def suite_grid(request: HttpRequest, suite_id) -> HttpResponse:
    """The grid of runs of a suite (``?runs=`` or ``?last=N``, ``tag``, ``change``, ``flaky``,
    ``sort``); a bad run choice shows the error above an empty grid (400)."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    error, grid = None, None
    try:
        query = GridQuery.from_params(request.GET, runs=request.GET.getlist("runs"))
        grid = grid_get(suite=suite, query=query, viewer=request.user)
    except DomainError as exc:
        error, query = str(exc), GridQuery()
    context = {
        "suite": suite,
        "grid": grid,
        "query": query,
        "error": error,
        "choices": grid_run_choices(suite=suite),
        "sorts": SORTS,
        "change_classes": GRID_CHANGES,
        "max_runs": MAX_RUNS,
        "export_query": query.url()[1:],
    }
    return render(request, "evals/suite_grid.html", context, status=400 if error else 200)


@require_GET
@role_required(*VIEWER_ROLES)
def case_history(request: HttpRequest, suite_id, case_id) -> HttpResponse:
    """A case's pass rate in every run of its suite, newest first, with its trials."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    case = get_object_or_404(Case, uuid=case_id, suite=suite)
    history = case_history_get(case=case, viewer=request.user)
    return render(request, "evals/case_history.html", {"suite": suite, "history": history})


@require_GET
@role_required(*VIEWER_ROLES)
def suite_cost_quality_chart(request: HttpRequest, suite_id) -> HttpResponse:
    """The suite's pass rate against cost per trial, one point per run, as an SVG image."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    chart = cost_quality_chart_get(suite=suite, viewer=request.user)
    return HttpResponse(cost_quality_svg(chart), content_type="image/svg+xml; charset=utf-8")
