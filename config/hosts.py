"""The host names a production server answers for: refuse to serve without them.

With DEBUG off, Django answers every request whose ``Host`` is not in ``ALLOWED_HOSTS``
with a 400 (``DisallowedHost``), and an empty list refuses every host: the site would
answer nothing but "Bad request" pages, saying why only in the log. ``runserver`` refuses
to start then (Django's ``CommandError``); the WSGI and ASGI entry points, which gunicorn
and any other server load, do the same through ``hosts_required``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def hosts_required() -> None:
    """Raise ``ImproperlyConfigured`` when DEBUG is off and ``ALLOWED_HOSTS`` is empty
    (the ``ALLOWED_HOSTS`` environment variable, comma-separated, sets it); nothing otherwise.
    """
    if not settings.DEBUG and not settings.ALLOWED_HOSTS:
        raise ImproperlyConfigured(
            "ALLOWED_HOSTS must be set when DEBUG is false (comma-separated host names, e.g. "
            "ALLOWED_HOSTS=assay.example.com): without it every request is answered 400"
        )
