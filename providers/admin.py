from typing import TYPE_CHECKING

from django.contrib import admin

from providers.models import ModelPrice

if TYPE_CHECKING:
    ModelPriceAdminBase = admin.ModelAdmin[ModelPrice]
else:  # Django's ModelAdmin takes no type parameter at run time
    ModelPriceAdminBase = admin.ModelAdmin


@admin.register(ModelPrice)
class ModelPriceAdmin(ModelPriceAdminBase):
    list_display = (
        "model",
        "input_usd_per_mtok",
        "output_usd_per_mtok",
        "cache_write_usd_per_mtok",
        "cache_read_usd_per_mtok",
        "reasoning_usd_per_mtok",
        "note",
        "updated_at",
    )
    list_editable = (
        "input_usd_per_mtok",
        "output_usd_per_mtok",
        "cache_write_usd_per_mtok",
        "cache_read_usd_per_mtok",
        "reasoning_usd_per_mtok",
        "note",
    )
    search_fields = ("model", "note")
