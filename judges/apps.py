from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"
    default_auto_field = "django.db.models.BigAutoField"
