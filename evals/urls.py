from django.urls import path

from evals.views import cases as views_cases
from evals.views import comparison as views_comparison
from evals.views import experiments as views_experiments
from evals.views import grid as views_grid
from evals.views import runs as views
from evals.views import suites as views_suite

app_name = "evals"

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/new/", views.run_new, name="run-new"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/progress/", views.run_progress, name="run-progress"),
    path("runs/<uuid:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/retry/", views.run_retry, name="run-retry"),
    path("runs/<uuid:run_id>/cases/<uuid:case_id>/", views.run_case, name="run-case"),
    path("trials/<uuid:trial_id>/", views.trial_detail, name="trial-detail"),
    path("suites/<uuid:suite_id>/", views_suite.suite_detail, name="suite-detail"),
    path("cases/new/", views_cases.case_new, name="case-new"),
    path(
        "suites/<uuid:suite_id>/cases/<uuid:case_id>/edit/",
        views_cases.case_edit_view,
        name="case-edit",
    ),
    path(
        "suites/<uuid:suite_id>/cases/<uuid:case_id>/retire/",
        views_cases.case_retire_view,
        name="case-retire",
    ),
    path(
        "suites/<uuid:suite_id>/cases/<uuid:case_id>/graduate/",
        views_suite.case_graduate,
        name="case-graduate",
    ),
    path("suites/<uuid:suite_id>/grid/", views_grid.suite_grid, name="suite-grid"),
    path(
        "suites/<uuid:suite_id>/cost-quality.svg",
        views_grid.suite_cost_quality_chart,
        name="suite-cost-quality-chart",
    ),
    path(
        "suites/<uuid:suite_id>/cases/<uuid:case_id>/history/",
        views_grid.case_history,
        name="case-history",
    ),
    path("runs/<uuid:run_id>/baseline/", views_suite.baseline_set, name="baseline-set"),
    path("runs/<uuid:run_id>/compare/", views_comparison.comparison_pick, name="comparison-pick"),
    path(
        "runs/<uuid:head_id>/compare/<uuid:base_id>/",
        views_comparison.comparison,
        name="comparison",
    ),
    path(
        "runs/<uuid:head_id>/compare/<uuid:base_id>/settle/",
        views_comparison.comparison_settle,
        name="comparison-settle",
    ),
    path(
        "runs/<uuid:head_id>/compare/<uuid:base_id>/top-up/",
        views_comparison.comparison_top_up,
        name="comparison-top-up",
    ),
    path(
        "runs/<uuid:head_id>/compare/<uuid:base_id>/cases/<uuid:case_id>/",
        views_comparison.comparison_case,
        name="comparison-case",
    ),
    path("experiments/", views_experiments.experiment_list, name="experiment-list"),
    path("experiments/new/", views_experiments.experiment_new, name="experiment-new"),
    path(
        "experiments/<uuid:experiment_id>/",
        views_experiments.experiment_detail,
        name="experiment-detail",
    ),
    path(
        "experiments/<uuid:experiment_id>/progress/",
        views_experiments.experiment_progress,
        name="experiment-progress",
    ),
    path(
        "experiments/<uuid:experiment_id>/settle/",
        views_experiments.experiment_settle,
        name="experiment-settle",
    ),
    path(
        "experiments/<uuid:experiment_id>/cases/<path:case_key>/",
        views_experiments.experiment_case,
        name="experiment-case",
    ),
]
