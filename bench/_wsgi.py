"""The project's WSGI app for the HTTP benchmarks (``bench/_server.py``): production
settings from the environment, cookies without ``Secure`` (plain HTTP on loopback).
Run as a script, it serves through waitress: ``_wsgi.py <port> <threads>``."""

import sys

import django

django.setup()

from django.conf import settings  # noqa: E402

settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = False

from config.wsgi import application  # noqa: E402

if __name__ == "__main__":
    from waitress import serve

    serve(application, host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]))
