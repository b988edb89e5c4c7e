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

PUBLIC_PREFIXES = ("/accounts/login/", "/static/", "/healthz")


class ContentSecurityPolicyMiddleware:
    """Adds a CSP forbidding inline script to every HTML response (admin included)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response


class UnstorableFormMiddleware:
    """Refuses a query string, or an HTML form post (urlencoded or multipart fields; uploaded
    files are the importers' to check), holding U+0000 or a lone surrogate in a parameter's
    name or value: a 400 naming the parameter before any view reads it (``core.text``, the
    refuse policy), so no filter, form, raw ``request.POST`` read or service can store it or
    fail on it (PostgreSQL refuses NUL even in a query; SQLite would answer): the "Bad
    request" page (``core.http.bad_request``), which after a post says to go back to the
    form. The API is left to its own layer, which checks after authentication and
    permissions (``core.api.checks``, its parsers and serializers); form posts to other
    views exempt from CSRF too, so a body is read here only where the CSRF check has read
    it already. A view marked ``core.forms.unstorable_shown_on_form`` reads its whole post
    through a ``core.forms.StorableForm``, which shows the refusal on the field with the
    typed text (U+FFFD in the NUL's place) and stores nothing: its post is let through."""

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
    """Redirects anonymous users to the login page for every page but login and static.

    An htmx request (``HX-Request: true``, a fragment the page asked for) gets a 401 with a
    one-line text body instead: following a redirect would swap the login page into the
    fragment (the labeling queue's item) and lose what the user typed. htmx swaps no 4xx,
    so the page stays as it is and its script offers to log in again
    (``static/js/labeling.js`` keeps the typed label and saves it after login).
    The admin and the API keep their own authentication answers.
    """

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
    """A ``BadRequest`` raised by a page (``core.http.query_uuid``, ``query_choice``,
    ``query_page``: a malformed query parameter) is answered with the "Bad request" page
    naming the parameter (``core.http.bad_request``, the ``handler400``) in every mode:
    Django shows its technical debug page instead when DEBUG is on, and ``make demo`` runs
    with DEBUG on."""

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
    """A page's form post over its limit (``RequestDataTooBig``, ``TooManyFieldsSent``:
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``, ``DATA_UPLOAD_MAX_NUMBER_FIELDS``) gets the "Bad
    request" page saying so (``core.http.bad_request``) in every mode. It reads the form
    before ``CsrfViewMiddleware`` does (which would raise the same error outside any view,
    where Django shows its technical page when DEBUG is on, as ``make demo`` runs)."""

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
    """Shows times in the viewer's zone: the IANA zone name the browser reports (set in the
    ``assay_tz`` cookie by static/js/assay.js) is activated for the request; a missing or
    unknown name leaves the server zone (UTC). Storage is always aware UTC; this is the one
    layer that converts (templates render datetimes in the active zone)."""

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
    """Adds ``Server-Timing: app;dur=<ms>`` to every response: the time in ms from this
    middleware (first in ``MIDDLEWARE``) receiving the request to the response coming back
    through it, i.e. sessions, auth, CSRF, the view, its queries and the template; not the
    WSGI server's queueing or socket I/O. Read by ``bench/bench_label_save.py`` and shown
    in the browser's network panel (https://www.w3.org/TR/server-timing/)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        ms = (time.perf_counter() - start) * 1000
        response.headers["Server-Timing"] = f"app;dur={ms:.2f}"
        return response
