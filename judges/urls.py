from django.urls import path

from judges import views

app_name = "judges"

urlpatterns = [
    path("judges/", views.judge_list, name="judge-list"),
    path("judge-versions/new/", views.judge_version_new, name="version-new"),
    path(
        "judge-versions/<uuid:version_id>/",
        views.judge_version_detail,
        name="version-detail",
    ),
    path(
        "judge-versions/<uuid:version_id>/runs/",
        views.judge_run_start,
        name="judge-run-start",
    ),
    path(
        "judge-versions/<uuid:version_id>/probes/",
        views.probe_run_start,
        name="probe-run-start",
    ),
    path("judge-runs/pairwise/", views.pairwise_judge_run_start, name="pairwise-judge-run-start"),
    path("judge-runs/<uuid:judge_run_id>/", views.judge_run_detail, name="judge-run-detail"),
    path(
        "judge-runs/<uuid:judge_run_id>/progress/",
        views.judge_run_progress,
        name="judge-run-progress",
    ),
    path(
        "judge-runs/<uuid:judge_run_id>/cancel/",
        views.judge_run_cancel,
        name="judge-run-cancel",
    ),
]
