from django.urls import path

from . import views

app_name = "evals"

urlpatterns = [
    path("runs/", views.run_list, name="run-list"),
    path("runs/new/", views.run_new, name="run-new"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/progress/", views.run_progress, name="run-progress"),
    path("runs/<uuid:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/cases/<uuid:case_id>/", views.run_case, name="run-case"),
    path("trials/<uuid:trial_id>/", views.trial_detail, name="trial-detail"),
    path("imports/new/", views.import_upload, name="import-upload"),
]
