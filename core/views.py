"""The operations endpoints (docs/operations.md): ``/healthz`` (liveness), ``/readyz``
(readiness, ``core.health``) and ``/metrics`` (Prometheus, ``core.metrics``). None needs a
session; ``/metrics`` has its own access rule (``core.metrics.access``)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from core.health import readiness_checks
from core.metrics.access import metrics_access
from core.metrics.exposition import CONTENT_TYPE, metrics_text


@require_safe
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    """200 "ok" while the process answers; asks nothing of the database or the broker."""
    return HttpResponse("ok", content_type="text/plain")


@require_safe
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when every check is ok, else 503: ``{"status": "ok"|"failed", "checks": [{"name",
    "status", "reason"}]}``."""
    checks = readiness_checks()
    ready = all(check.ok for check in checks)
    return JsonResponse(
        {
            "status": "ok" if ready else "failed",
            "checks": [
                {"name": c.name, "status": "ok" if c.ok else "failed", "reason": c.reason}
                for c in checks
            ],
        },
        status=200 if ready else 503,
    )


@require_safe
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format to a reader ``core.metrics.access`` allows; else 403 (a wrong
    token) or 404."""
    status = metrics_access(
        request,
        token=settings.ASSAY["METRICS_TOKEN"],
        networks=settings.ASSAY["METRICS_ALLOWED_NETWORKS"],
    )
    if status == 403:
        return HttpResponse("forbidden", status=403, content_type="text/plain")
    if status != 200:
        return HttpResponseNotFound("not found", content_type="text/plain")
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE)
