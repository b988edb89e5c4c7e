"""The Celery application; settings come from Django's (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# A worker skips Django's system checks at start (Celery's Django fixup runs them unless this
# is set): they import every URLconf and view, scipy and pandas among them, which no task
# needs at start: tens of MB of RSS and seconds of start-up per worker. The web
# process and `manage.py check` still run them.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("assay")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
