from django.urls import path

from labeling import views

app_name = "labeling"

urlpatterns = [
    path("calibration-sets/", views.calibration_set_list, name="set-list"),
    path("calibration-sets/new/", views.calibration_set_new, name="set-new"),
    path("calibration-sets/<uuid:set_id>/", views.calibration_set_detail, name="set-detail"),
    path("calibration-sets/<uuid:set_id>/items/add/", views.calibration_item_add, name="item-add"),
    path("calibration-sets/<uuid:set_id>/top-up/", views.calibration_set_top_up, name="set-top-up"),
    path(
        "calibration-sets/<uuid:set_id>/items/remove/",
        views.calibration_item_remove,
        name="item-remove",
    ),
    path(
        "calibration-sets/<uuid:set_id>/instructions/",
        views.calibration_set_instructions,
        name="set-instructions",
    ),
    path("calibration-sets/<uuid:set_id>/label/", views.queue, name="queue"),
    path("calibration-sets/<uuid:set_id>/label/save/", views.label_save, name="label-save"),
    path("calibration-sets/<uuid:set_id>/label/undo/", views.label_undo, name="label-undo"),
    path("calibration-sets/<uuid:set_id>/review/save/", views.review_save, name="review-save"),
    path("runs/<uuid:run_id>/review/", views.review_start, name="review-start"),
    path(
        "runs/<uuid:run_id>/disagreements/review/",
        views.disagreements_review,
        name="disagreements-review",
    ),
    path("judge-versions/<uuid:version_id>/calibration/", views.calibration, name="calibration"),
    path("judge-versions/<uuid:version_id>/trust/", views.trust_approve, name="trust-approve"),
    path("judge-versions/<uuid:version_id>/trust/revoke/", views.trust_revoke, name="trust-revoke"),
    path("judge-versions/<uuid:version_id>/improve/", views.judge_improve, name="improve"),
    path("judges/<uuid:judge_id>/versions/", views.judge_versions_compare, name="versions-compare"),
    path(
        "judge-runs/<uuid:judge_run_id>/preferences/",
        views.preference_queue,
        name="preferences",
    ),
    path("adjudication/", views.adjudication_list, name="adjudication"),
    path("adjudication/decide/", views.adjudication_save, name="adjudication-save"),
]
