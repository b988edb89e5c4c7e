from django.contrib import admin

from providers.models import ModelPrice


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ("model", "input_usd_per_mtok", "output_usd_per_mtok", "note", "updated_at")
    list_editable = ("input_usd_per_mtok", "output_usd_per_mtok", "note")
    search_fields = ("model", "note")
