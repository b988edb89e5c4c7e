from django.apps import AppConfig


class InteropConfig(AppConfig):
    name = "interop"
    verbose_name = "Import and export"
