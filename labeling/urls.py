from django.urls import path

from labeling.views import (
    adjudication,
    assignment,
    calibration,
    improve,
    notes,
    preferences,
    queue,
    review,
    reviewers,
    sets,
)

app_name = "labeling"

urlpatterns = [
    path("calibration-sets/", sets.calibration_set_list, name="set-list"),
    path("calibration-sets/new/", sets.calibration_set_new, name="set-new"),
    path("calibration-sets/<uuid:set_id>/", sets.calibration_set_detail, name="set-detail"),
    path("calibration-sets/<uuid:set_id>/items/add/", sets.calibration_item_add, name="item-add"),
    path("calibration-sets/<uuid:set_id>/top-up/", sets.calibration_set_top_up, name="set-top-up"),
    path(
        "calibration-sets/<uuid:set_id>/items/remove/",
        sets.calibration_item_remove,
        name="item-remove",
    ),
    path(
        "calibration-sets/<uuid:set_id>/instructions/",
        sets.calibration_set_instructions,
        name="set-instructions",
    ),
    path(
        "calibration-sets/<uuid:set_id>/assignment/",
        assignment.assignment_save,
        name="assignment",
    ),
    path(
        "calibration-sets/<uuid:set_id>/assignment/reassign/",
        assignment.assignment_reassign_save,
        name="assignment-reassign",
    ),
    path("calibration-sets/<uuid:set_id>/label/", queue.queue, name="queue"),
    path("calibration-sets/<uuid:set_id>/label/save/", queue.label_save, name="label-save"),
    path("calibration-sets/<uuid:set_id>/label/undo/", queue.label_undo, name="label-undo"),
    path("calibration-sets/<uuid:set_id>/review/save/", queue.review_save, name="review-save"),
    path("calibration-sets/<uuid:set_id>/notes/", notes.item_note_save, name="note-save"),
    path("reviewers/", reviewers.reviewer_list, name="reviewer-list"),
    path("reviewers/<str:username>/", reviewers.reviewer_record, name="reviewer-record"),
    path("runs/<uuid:run_id>/review/", review.review_start, name="review-start"),
    path(
        "runs/<uuid:run_id>/disagreements/review/",
        review.disagreements_review,
        name="disagreements-review",
    ),
    path(
        "judge-versions/<uuid:version_id>/calibration/", calibration.calibration, name="calibration"
    ),
    path(
        "judge-versions/<uuid:version_id>/trust/", calibration.trust_approve, name="trust-approve"
    ),
    path(
        "judge-versions/<uuid:version_id>/trust/revoke/",
        calibration.trust_revoke,
        name="trust-revoke",
    ),
    path("judge-versions/<uuid:version_id>/improve/", improve.judge_improve, name="improve"),
    path(
        "judges/<uuid:judge_id>/versions/", improve.judge_versions_compare, name="versions-compare"
    ),
    path(
        "judge-runs/<uuid:judge_run_id>/preferences/",
        preferences.preference_queue,
        name="preferences",
    ),
    path("adjudication/", adjudication.adjudication_list, name="adjudication"),
    path("adjudication/decide/", adjudication.adjudication_save, name="adjudication-save"),
]
