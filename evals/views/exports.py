"""Downloads of a run, its labels and a comparison as CSV or Parquet (``evals.exports``).

``?format=csv|parquet`` (default csv) and ``?tz=<IANA zone>`` (default UTC) for the times.
Every role that can see the run page may download (``VIEWER_ROLES``); a bad option is a 400.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from core.http import VIEWER_ROLES, role_required
from evals import exports
from evals.models import Run


def table_download_response(request: HttpRequest, build, filename: str) -> HttpResponse:
    """The table ``build(zone)`` as ``<filename>.csv|parquet`` by ``?format=``, times in
    ``?tz=``; a plain-text 400 naming the option otherwise (the pages' download links)."""
    fmt = request.GET.get("format", "csv")
    try:
        if fmt not in exports.FORMATS:
            raise exports.ExportError(
                f"format: expected one of {', '.join(exports.FORMATS)}, got {fmt!r}"
            )
        zone = exports.zone_get(name=request.GET.get("tz"))
        body = exports.table_write(table=build(zone), fmt=fmt)
    except exports.ExportError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    response = HttpResponse(body, content_type=exports.CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response


@require_GET
@role_required(*VIEWER_ROLES)
def run_export(request: HttpRequest, run_id) -> HttpResponse:
    """A run, one row per trial (``exports.run_table``)."""
    run = get_object_or_404(Run.objects.select_related("suite"), uuid=run_id)
    return table_download_response(
        request, lambda zone: exports.run_table(run=run, zone=zone), f"run-{run.uuid}"
    )


@require_GET
@role_required(*VIEWER_ROLES)
def labels_export(request: HttpRequest, run_id) -> HttpResponse:
    """The labels on a run's trials (``exports.labels_table``)."""
    run = get_object_or_404(Run, uuid=run_id)
    return table_download_response(
        request, lambda zone: exports.labels_table(run=run, zone=zone), f"labels-{run.uuid}"
    )


@require_GET
@role_required(*VIEWER_ROLES)
def comparison_export(request: HttpRequest, head_id, base_id) -> HttpResponse:
    """A comparison, one row per case (``exports.comparison_table``)."""
    head = get_object_or_404(Run, uuid=head_id)
    base = get_object_or_404(Run, uuid=base_id)
    return table_download_response(
        request,
        lambda zone: exports.comparison_table(base=base, head=head),
        f"comparison-{base.uuid}-{head.uuid}",
    )
