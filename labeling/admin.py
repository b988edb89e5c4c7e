"""Admin for labeling, view only (``core.admin.RecordAdmin``): labels, sets and decisions
change only through the services that hold their rules.
"""

from django.contrib import admin

from core.admin import RecordAdmin, RecordInline
from labeling.models import (
    Adjudication,
    CalibrationItem,
    CalibrationSet,
    ItemNote,
    Label,
    LabelRevision,
    PreferenceLabel,
)


@admin.register(Label)
class LabelAdmin(RecordAdmin):
    list_display = ("id", "trial", "verdict", "reviewer", "reviewer_name", "source", "created_at")
    list_filter = ("verdict", "source")
    search_fields = ("critique", "reviewer__username", "reviewer_name")
    list_select_related = ("trial", "reviewer")
    raw_id_fields = ("trial", "reviewer")
    date_hierarchy = "created_at"


@admin.register(PreferenceLabel)
class PreferenceLabelAdmin(RecordAdmin):
    list_display = ("id", "pair", "preferred", "reviewer", "reviewer_name", "source", "created_at")
    list_filter = ("preferred", "source")
    search_fields = ("critique", "reviewer__username", "reviewer_name")
    list_select_related = ("pair", "reviewer")
    raw_id_fields = ("pair", "reviewer")


@admin.register(LabelRevision)
class LabelRevisionAdmin(RecordAdmin):
    list_display = ("id", "trial", "reviewer", "version", "verdict", "undoes", "created_at")
    list_filter = ("verdict",)
    raw_id_fields = ("label", "trial", "reviewer")


class CalibrationItemInline(RecordInline):
    model = CalibrationItem
    raw_id_fields = ("trial",)
    extra = 0


@admin.register(CalibrationSet)
class CalibrationSetAdmin(RecordAdmin):
    list_display = (
        "name",
        "suite",
        "run",
        "judge_version",
        "size",
        "seed",
        "frozen_at",
        "created_at",
    )
    list_select_related = ("suite", "run", "judge_version__judge")
    raw_id_fields = ("suite", "run", "judge_version", "created_by")
    readonly_fields = ("frozen_at",)
    inlines = [CalibrationItemInline]


@admin.register(CalibrationItem)
class CalibrationItemAdmin(RecordAdmin):
    list_display = ("id", "calibration_set", "trial", "position")
    raw_id_fields = ("calibration_set", "trial")


@admin.register(Adjudication)
class AdjudicationAdmin(RecordAdmin):
    list_display = ("id", "trial", "verdict", "decided_by", "created_at")
    list_filter = ("verdict",)
    raw_id_fields = ("trial", "decided_by")


# Records of the labeling rules (guidelines versions, reveals, preference orders): view only,
# written by their services (labeling.guidelines, labeling.freeze, labeling.preferences).
from labeling.models import GuidelinesVersion, PreferenceOrder, SetReveal  # noqa: E402


@admin.register(GuidelinesVersion)
class GuidelinesVersionAdmin(RecordAdmin):
    list_display = ("id", "calibration_set", "version", "created_by", "created_at")
    list_select_related = ("calibration_set", "created_by")
    raw_id_fields = ("calibration_set", "created_by")


@admin.register(SetReveal)
class SetRevealAdmin(RecordAdmin):
    list_display = ("id", "calibration_set", "reviewer", "revealed_at")
    list_select_related = ("calibration_set", "reviewer")
    raw_id_fields = ("calibration_set", "reviewer")


@admin.register(PreferenceOrder)
class PreferenceOrderAdmin(RecordAdmin):
    list_display = ("id", "pair", "swapped", "created_at")
    raw_id_fields = ("pair",)


@admin.register(ItemNote)
class ItemNoteAdmin(RecordAdmin):
    list_display = ("id", "item", "author", "by_lead", "created_at")
    list_filter = ("by_lead",)
    search_fields = ("text", "author__username")
    list_select_related = ("item", "author")
    raw_id_fields = ("item", "author")


from labeling.models import AssignmentChange, ItemAssignment, SetAssignment  # noqa: E402


@admin.register(SetAssignment, ItemAssignment, AssignmentChange)
class AssignmentAdmin(RecordAdmin):
    """Assignments change only through ``labeling.assignment`` (recorded)."""
