from django.urls import path

from . import views

app_name = "judges"

urlpatterns = [
    path("judges/", views.judge_list, name="judge-list"),
    path("judge-versions/<uuid:version_id>/calibration/", views.calibration,
         name="calibration"),
    path("judge-versions/<uuid:version_id>/trust/", views.trust_approve, name="trust-approve"),
    path("judge-versions/<uuid:version_id>/trust/revoke/", views.trust_revoke,
         name="trust-revoke"),
]
