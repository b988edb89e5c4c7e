from django.contrib import admin, messages

from apitokens.models import ApiToken
from apitokens.tokens import token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens listed and revoked; ``manage.py token_create`` creates them (printed once)."""

    list_display = ("name", "user", "created_by", "created_at", "last_used_at", "revoked_at")
    readonly_fields = (
        "uuid",
        "user",
        "name",
        "key_hash",
        "created_by",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        done = sum(token_revoke(token=t, by=request.user) for t in queryset)
        self.message_user(request, f"{done} token(s) revoked", messages.SUCCESS)
