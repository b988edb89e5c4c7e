"""Admin for labeling: human labels on trials and preferences on pairs."""

from django.contrib import admin

from .models import Label, PreferenceLabel


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ("id", "trial", "verdict", "reviewer", "reviewer_name", "source",
                    "created_at")
    list_filter = ("verdict", "source")
    search_fields = ("critique", "reviewer__username", "reviewer_name")
    list_select_related = ("trial", "reviewer")
    raw_id_fields = ("trial", "reviewer")
    date_hierarchy = "created_at"


@admin.register(PreferenceLabel)
class PreferenceLabelAdmin(admin.ModelAdmin):
    list_display = ("id", "pair", "preferred", "reviewer", "reviewer_name", "source",
                    "created_at")
    list_filter = ("preferred", "source")
    search_fields = ("critique", "reviewer__username", "reviewer_name")
    list_select_related = ("pair", "reviewer")
    raw_id_fields = ("pair", "reviewer")
