from django.urls import path

from judges import views, views_versions

app_name = "judges"

urlpatterns = [
    path("judges/", views.judge_list, name="judge-list"),
    path("judge-versions/new/", views_versions.judge_version_new, name="version-new"),
    path(
        "judge-versions/<uuid:version_id>/",
        views_versions.judge_version_detail,
        name="version-detail",
    ),
    path(
        "judge-versions/<uuid:version_id>/runs/",
        views_versions.judge_run_start,
        name="judge-run-start",
    ),
    path(
        "judge-versions/<uuid:version_id>/probes/",
        views_versions.probe_run_start,
        name="probe-run-start",
    ),
    path("judge-versions/<uuid:version_id>/calibration/", views.calibration, name="calibration"),
    path("judge-versions/<uuid:version_id>/trust/", views.trust_approve, name="trust-approve"),
    path("judge-versions/<uuid:version_id>/trust/revoke/", views.trust_revoke, name="trust-revoke"),
]
