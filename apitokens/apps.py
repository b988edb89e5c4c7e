from django.apps import AppConfig


class ApitokensConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apitokens"
    verbose_name = "API tokens"
