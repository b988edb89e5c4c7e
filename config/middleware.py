"""Project-wide middleware: login everywhere, a strict Content-Security-Policy, and form
posts refused when they hold text the database cannot store."""

from __future__ import annotations

import time
from urllib.parse import unquote
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import BadRequest, RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from core.errors import DomainError
from core.http import bad_request
from core.text import unstorable_refuse_params
from core.zones import zone_parse

# No inline script, no inline event handlers, nothing from other origins.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

# /metrics has its own access rule (core.metrics.access); /healthz and /readyz are probes.
PUBLIC_PREFIXES = ("/accounts/login/", "/static/", "/healthz", "/readyz", "/metrics")


class ContentSecurityPolicyMiddleware:
    """Adds a CSP forbidding inline script to every HTML response (admin included)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response


class UnstorableFormMiddleware:
    """A 400 naming the parameter (``core.http.bad_request``) for a query string or HTML form post
    holding U+0000 or a lone surrogate in a name or value, before any view reads it
    (``core.text``'s refuse policy; PostgreSQL refuses NUL even in a query). Uploaded files,
    the API (``core.api.checks``) and CSRF-exempt views are checked elsewhere; a view marked
    ``@unstorable_shown_on_form`` is let through (``core.forms``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None  # after authentication and permissions: core.api.checks
        sources = [("query parameter", "", request.GET)]
        if (
            request.method == "POST"
            and not getattr(view_func, "csrf_exempt", False)
            and not getattr(view_func, "unstorable_shown_on_form", False)
        ):
            sources.append(("field", "; nothing was saved", request.POST))
        for noun, outcome, params in sources:
            try:
                unstorable_refuse_params(params)
            except DomainError as exc:
                # The "Bad request" page naming the parameter, as every page's 400.
                return bad_request(
                    request, BadRequest(f"{noun} {exc.field}: {exc.message}{outcome}.")
                )
        return None


class LoginRequiredMiddleware:
    """Redirects anonymous users to login on every page but login and static. An htmx request
    gets a 401 text instead (a redirect would swap the login page into the fragment and lose
    the typed label; ``static/js/labeling.js`` saves it after login). Admin and API keep their
    own answers."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if (
            request.user.is_authenticated
            or path.startswith(PUBLIC_PREFIXES)
            or path.startswith("/admin/")
            or path.startswith("/api/")
        ):
            return self.get_response(request)
        if request.headers.get("HX-Request") == "true":
            return HttpResponse(
                "Your session has expired: log in again.",
                status=401,
                content_type="text/plain; charset=utf-8",
            )
        return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)


class BadRequestPageMiddleware:
    """A page's ``BadRequest`` gets the "Bad request" page naming the parameter in every mode
    (Django shows its debug page under DEBUG, which ``make demo`` runs with)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, BadRequest):
            return bad_request(request, exception)
        return None


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class FormLimitMiddleware:
    """A form post over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` or ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` gets
    the "Bad request" page saying so; read here before CSRF would raise outside any view."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        if (
            request.method != "POST"
            or request.content_type not in FORM_TYPES
            or request.path_info.startswith("/api/")  # DRF parses (or refuses, 415) its own
        ):
            return None
        try:
            request.POST  # noqa: B018 - parsed once here; Django keeps it for the view
        except (RequestDataTooBig, TooManyFieldsSent) as exc:
            return bad_request(request, exc)
        return None


TIME_ZONE_COOKIE = "assay_tz"


class ViewerTimeZoneMiddleware:
    """Activates the viewer's zone from the ``assay_tz`` cookie (set by static/js/assay.js); else
    UTC. Storage stays aware UTC; templates render in the active zone."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = viewer_time_zone(request)
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def viewer_time_zone(request: HttpRequest) -> ZoneInfo | None:
    """The zone named by the request's ``assay_tz`` cookie, or None when absent or unknown."""
    return zone_parse(unquote(request.COOKIES.get(TIME_ZONE_COOKIE, "")))


class ServerTimingMiddleware:
    """``Server-Timing: app;dur=<ms>`` on every response: from this middleware (first in
    ``MIDDLEWARE``) to the response, server queueing excluded (bench/bench_label_save.py)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        ms = (time.perf_counter() - start) * 1000
        response.headers["Server-Timing"] = f"app;dur={ms:.2f}"
        return response
