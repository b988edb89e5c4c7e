"""The API's docs page at /api/docs/ (Swagger UI from drf-spectacular-sidecar's static files,
started by static/js/api-docs.js; no CSP exception needed) and the schema's description of
Assay's authentication."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from drf_spectacular.extensions import OpenApiAuthenticationExtension

from core.http import VIEWER_ROLES, role_required


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """``BearerTokenAuthentication`` in the schema as an HTTP bearer scheme."""

    target_class = "apitokens.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token: `Authorization: Bearer <token>`. A lead creates one "
            "with `manage.py token_create USER NAME` (shown once, stored "
            "hashed) and revokes it in the admin.",
        }


# login_required: LoginRequiredMiddleware leaves /api/ to the API's own answers (401/403),
# but this is a page, so an anonymous visitor is sent to the login page like everywhere else.
@require_GET
@login_required
@role_required(*VIEWER_ROLES)
def api_docs(request: HttpRequest) -> HttpResponse:
    """Swagger UI over ``/api/schema/``; viewers only (403 without a role)."""
    return render(request, "api/docs.html", {"schema_url": reverse("api:schema")})
