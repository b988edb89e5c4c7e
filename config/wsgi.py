"""WSGI entry point."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from config.hosts import hosts_required

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
hosts_required()  # DEBUG off and no host names: every request would be a 400
# The URL conf, and with it every view, DRF, the API and the statistics, is otherwise
# imported by each server process on its first request: under gunicorn, after the fork, in
# every worker (~1.5 s of CPU each on the project's machine), and again in each
# worker gunicorn starts anew. Loaded here, ``--preload`` imports it once for all workers.
get_resolver().url_patterns  # noqa: B018 (imports the URL conf)
get_resolver().reverse_dict  # noqa: B018 (builds the reverse lookup tables)
# Everything loaded so far (Django, the apps, numpy, the URL conf) lives as long as the
# process: moved out of the collector's reach, so that a collection during a request walks
# only that request's objects (gc.freeze, Python's docs). Under gunicorn, ``--preload``
# also keeps these pages shared between the workers.
gc.freeze()
