"""ASGI entry point."""

import os

from django.core.asgi import get_asgi_application

from config.hosts import hosts_required

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()
hosts_required()  # DEBUG off and no host names: every request would be a 400
