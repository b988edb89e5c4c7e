"""Project-wide middleware: login everywhere, and a strict Content-Security-Policy."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse

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


class LoginRequiredMiddleware:
    """Redirects anonymous users to the login page for every page but login and static.

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
        return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
