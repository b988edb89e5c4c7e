"""API wiring under /api/: read-only resources, actions, the OpenAPI schema."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import SimpleRouter

from config import api_docs
from evals.api import cases as cases_api
from evals.api import comparisons as comparisons_api
from evals.api import experiments as experiments_api
from evals.api import grid as grid_api
from evals.api.runs import baselines as baselines_api
from evals.api.runs import detail as runs_api
from evals.api.runs import grades as grades_api
from evals.api.runs import lifecycle as lifecycle_api
from evals.api.runs import prune as prune_api
from evals.api.runs import suites as suites_api
from evals.api.runs import trials as trials_api
from interop.api import exports as exports_api
from interop.api import imports as api_imports
from interop.api import ingest as api_ingest
from judges import api as judges_api
from labeling.api import labels as labels_api
from labeling.api import notes as notes_api
from labeling.api import sets as calibration_sets_api

router = SimpleRouter()
router.register("suites", suites_api.SuiteViewSet, basename="suite")
router.register("cases", suites_api.CaseViewSet, basename="case")
router.register("runs", runs_api.RunViewSet, basename="run")
router.register("trials", trials_api.TrialViewSet, basename="trial")
router.register("grades", grades_api.GradeViewSet, basename="grade")
router.register("baselines", baselines_api.BaselineViewSet, basename="baseline")
router.register("judge-versions", judges_api.JudgeVersionViewSet, basename="judge-version")
router.register("judge-runs", judges_api.JudgeRunViewSet, basename="judge-run")
router.register(
    "calibration-sets", calibration_sets_api.CalibrationSetViewSet, basename="calibration-set"
)
router.register("labels", labels_api.LabelViewSet, basename="label")

app_name = "api"
urlpatterns = [
    path("runs/start", lifecycle_api.RunStartApi.as_view(), name="run-start"),
    path("runs/prune", prune_api.RunsPruneApi.as_view(), name="runs-prune"),
    path("runs/<str:run_id>/retry", lifecycle_api.RunRetryApi.as_view(), name="run-retry"),
    path("runs/<str:run_id>/grade", grades_api.RunGradeApi.as_view(), name="run-grade"),
    path("runs/<str:run_id>/cancel", lifecycle_api.RunCancelApi.as_view(), name="run-cancel"),
    path("experiments", experiments_api.ExperimentsApi.as_view(), name="experiments"),
    path(
        "experiments/<str:experiment_id>",
        experiments_api.ExperimentDetailApi.as_view(),
        name="experiment-detail",
    ),
    path(
        "experiments/<str:experiment_id>/settle",
        experiments_api.ExperimentSettleApi.as_view(),
        name="experiment-settle",
    ),
    path("baselines/set", baselines_api.BaselineSetApi.as_view(), name="baseline-set"),
    path("ingest", api_ingest.IngestApi.as_view(), name="ingest"),
    path("imports", api_imports.ImportApi.as_view(), name="imports"),
    path("gate", comparisons_api.GateApi.as_view(), name="gate"),
    path("suites/<str:suite_id>/grid", grid_api.SuiteGridApi.as_view(), name="suite-grid"),
    path(
        "suites/<str:suite_id>/grid/export",
        exports_api.GridExportApi.as_view(),
        name="suite-grid-export",
    ),
    path("suites/<str:suite_id>/cases", cases_api.SuiteCaseCreateApi.as_view(), name="case-create"),
    path(
        "suites/<str:suite_id>/cases/<str:case_id>",
        cases_api.SuiteCaseApi.as_view(),
        name="case-edit",
    ),
    path(
        "suites/<str:suite_id>/cases/<str:case_id>/retire",
        cases_api.SuiteCaseRetireApi.as_view(),
        name="case-retire",
    ),
    path(
        "suites/<str:suite_id>/cases/<str:case_id>/history",
        grid_api.CaseHistoryApi.as_view(),
        name="case-history",
    ),
    path(
        "top-ups/<str:top_up_id>/",
        comparisons_api.TopUpDetailApi.as_view(),
        name="top-up-detail",
    ),
    path("comparisons/", comparisons_api.ComparisonApi.as_view(), name="comparison"),
    path(
        "comparisons/export",
        exports_api.ComparisonExportApi.as_view(),
        name="comparison-export",
    ),
    path("runs/<str:run_id>/export", exports_api.RunExportApi.as_view(), name="run-export"),
    path(
        "runs/<str:run_id>/labels-export",
        exports_api.LabelsExportApi.as_view(),
        name="run-labels-export",
    ),
    path("judge-runs", judges_api.JudgeRunStartApi.as_view(), name="judge-run-start"),
    path(
        "judge-runs/<str:judge_run_id>/cancel",
        judges_api.JudgeRunCancelApi.as_view(),
        name="judge-run-cancel",
    ),
    path(
        "judge-runs/<str:judge_run_id>/preferences-export",
        exports_api.PreferencesExportApi.as_view(),
        name="judge-run-preferences-export",
    ),
    path("labels", labels_api.LabelSubmitApi.as_view(), name="label-submit"),
    path("labels/undo", labels_api.LabelUndoApi.as_view(), name="label-undo"),
    path(
        "calibration-sets/<uuid:set_id>/export",
        exports_api.CalibrationExportApi.as_view(),
        name="calibration-set-export",
    ),
    path(
        "calibration-sets/<uuid:set_id>/items/<uuid:trial_id>/notes",
        notes_api.ItemNotesApi.as_view(),
        name="item-notes",
    ),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", api_docs.api_docs, name="docs"),
    *router.urls,
]
