"""WSGI entry point."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# Everything loaded so far (Django, the apps, numpy, the URL conf) lives as long as the
# process: moved out of the collector's reach, so that a collection during a request walks
# only that request's objects (gc.freeze, Python's docs). Under gunicorn, ``--preload``
# also keeps these pages shared between the workers.
gc.freeze()
