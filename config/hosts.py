"""Refuse to serve without ``ALLOWED_HOSTS`` when DEBUG is off: Django would answer every
request with a 400. ``runserver`` refuses already; the WSGI and ASGI entry points call
``hosts_required``."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def hosts_required() -> None:
    """Raise ``ImproperlyConfigured`` when DEBUG is off and ``ALLOWED_HOSTS`` is empty."""
    if not settings.DEBUG and not settings.ALLOWED_HOSTS:
        raise ImproperlyConfigured(
            "ALLOWED_HOSTS must be set when DEBUG is false (comma-separated host names, e.g. "
            "ALLOWED_HOSTS=assay.example.com): without it every request is answered 400"
        )
