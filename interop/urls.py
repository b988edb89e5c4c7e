from django.urls import path

from interop import views

app_name = "interop"

urlpatterns = [
    path("imports/new/", views.import_upload, name="import-upload"),
    path("imports/<uuid:job_id>/", views.import_job, name="import-job"),
    path("runs/<uuid:run_id>/export/", views.run_export, name="run-export"),
    path("runs/<uuid:run_id>/labels/export/", views.labels_export, name="labels-export"),
    path(
        "runs/<uuid:head_id>/compare/<uuid:base_id>/export/",
        views.comparison_export,
        name="comparison-export",
    ),
    path(
        "judge-runs/<uuid:judge_run_id>/preferences/export/",
        views.preferences_export,
        name="preferences-export",
    ),
    path("suites/<uuid:suite_id>/grid/export/", views.grid_export, name="grid-export"),
    path(
        "calibration-sets/<uuid:set_id>/export/",
        views.calibration_export,
        name="set-export",
    ),
]
