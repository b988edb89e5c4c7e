"""Downloads of a run, its labels and a comparison as CSV or Parquet (``interop.exports``).

``?format=csv|parquet`` (default csv) and ``?tz=<IANA zone>`` (default UTC) for the times.
Every role that can see the run page may download (``VIEWER_ROLES``); a bad option is a 400.
A download holds what its user may see (``evals.blindness``): a reviewer gets only their own
labels, and no grade of a trial whose input an item they still have to label shares.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from core.errors import DomainError, value_shown
from core.forms import unstorable_shown_on_form
from core.http import RUNNER_ROLES, VIEWER_ROLES, HtmxHttpRequest, role_required
from core.ids import uuid_parse
from core.roles import ENGINEER, LEAD
from evals.blindness import BLIND_COMPARISON, comparison_is_blind
from evals.grid.build import GridQuery
from evals.models import Run, Suite
from interop import exports
from interop.calibration_export import calibration_table
from interop.grid_export import grid_table
from interop.import_jobs import import_job_create, import_job_get, import_job_progress
from interop.importers import results_import
from interop.importers.forms import ImportUploadForm
from judges.models import JudgeRun, JudgeVersion
from labeling.models import CalibrationSet


def table_download_response(request: HttpRequest, build, filename: str) -> HttpResponse:
    """The table ``build(zone)`` as ``<filename>.csv|parquet`` by ``?format=``, times in
    ``?tz=``; a plain-text 400 naming the option otherwise (the pages' download links)."""
    fmt = request.GET.get("format", "csv")
    try:
        if fmt not in exports.FORMATS:
            raise DomainError(
                f"format: expected one of {', '.join(exports.FORMATS)}, got {value_shown(fmt)}"
            )
        zone = exports.zone_get(name=request.GET.get("tz"))
        body = exports.table_write(table=build(zone), fmt=fmt)
    except DomainError as exc:
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
        request,
        lambda zone: exports.run_table(run=run, zone=zone, viewer=request.user),
        f"run-{run.uuid}",
    )


@require_GET
@role_required(*VIEWER_ROLES)
def labels_export(request: HttpRequest, run_id) -> HttpResponse:
    """The labels on a run's trials (``exports.labels_table``)."""
    run = get_object_or_404(Run, uuid=run_id)
    return table_download_response(
        request,
        lambda zone: exports.labels_table(run=run, zone=zone, viewer=request.user),
        f"labels-{run.uuid}",
    )


@require_GET
@role_required(*VIEWER_ROLES)
def preferences_export(request: HttpRequest, judge_run_id) -> HttpResponse:
    """The preference labels on a pairwise judge run's pairs (``exports.preferences_table``;
    a reviewer gets only their own)."""
    judge_run = get_object_or_404(JudgeRun, uuid=judge_run_id)
    return table_download_response(
        request,
        lambda zone: exports.preferences_table(judge_run=judge_run, zone=zone, viewer=request.user),
        f"preferences-{judge_run.uuid}",
    )


@require_GET
@role_required(*VIEWER_ROLES)
def comparison_export(request: HttpRequest, head_id, base_id) -> HttpResponse:
    """A comparison, one row per case (``exports.comparison_table``)."""
    head = get_object_or_404(Run, uuid=head_id)
    base = get_object_or_404(Run, uuid=base_id)
    if comparison_is_blind(request.user, base, head):
        raise PermissionDenied(BLIND_COMPARISON)
    return table_download_response(
        request,
        lambda zone: exports.comparison_table(base=base, head=head),
        f"comparison-{base.uuid}-{head.uuid}",
    )


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(*RUNNER_ROLES)
def import_upload(request: HttpRequest) -> HttpResponse:
    """Import an uploaded results file (engineers and leads). POST runs ``results_import`` on
    the uploaded temporary file and redirects to the new run, or re-renders with the error."""

    error = ""
    if request.method == "POST":
        form = ImportUploadForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            upload = data["file"]
            if upload.size > settings.ASSAY["IMPORT_INLINE_BYTES"]:
                job = import_job_create(
                    upload=upload, options=_import_options(data), user=request.user
                )
                return redirect("interop:import-job", job_id=job.uuid)
            try:
                summary = results_import(
                    stream=upload.file,
                    filename=upload.name,
                    suite_name=data["suite"],
                    run_name=data["run"],
                    fmt=data["format"] or None,
                    mapping=data["mapping"],
                    suite_kind=data["suite_kind"],
                    threshold=data["threshold"],
                    user=request.user,
                )
            except DomainError as exc:
                error = f"Nothing was imported. {exc}"
            else:
                run = summary.runs[0]
                messages.success(
                    request,
                    f"Imported {summary.trials} trials of {summary.cases} cases "
                    f"into {summary.suite.name} / {', '.join(r.name for r in summary.runs)}."
                    + (f" {summary.retired_sentence()}" if summary.retired_cases else ""),
                )
                return redirect("evals:run-detail", run_id=run.uuid)
    else:
        form = ImportUploadForm()
    return render(
        request,
        "evals/import_form.html",
        {"form": form, "error": error},
        status=400 if error else 200,
    )


def _import_options(data: dict) -> dict:
    """The import form's choices, as an import job stores them (JSON)."""
    return {
        "suite": data["suite"],
        "run": data["run"],
        "format": data["format"] or None,
        "mapping": data["mapping"],
        "suite_kind": data["suite_kind"],
        "threshold": data["threshold"],
    }


@require_GET
@role_required(*RUNNER_ROLES)
def import_job(request: HtmxHttpRequest, job_id) -> HttpResponse:
    """A background import's page (``interop.import_jobs``): its progress bar, polled every
    second by htmx (the ``job-progress`` partial; 286 stops the polling once it ended), then
    the link to the new run or the error naming the row and field."""
    try:
        job = import_job_get(job_uuid=job_id, user=request.user)
    except DomainError as exc:
        raise Http404(str(exc)) from exc
    context = {"job": job, "progress": import_job_progress(job=job)}
    if request.htmx:
        html = render_to_string(
            "interop/import_job_detail.html#job-progress", context, request=request
        )
        return HttpResponseStopPolling(html) if job.is_terminal else HttpResponse(html)
    return render(request, "interop/import_job_detail.html", context)


@require_GET
@role_required(ENGINEER, LEAD)
def calibration_export(request: HttpRequest, set_id) -> HttpResponse:
    """A calibration set, one row per item (``interop.calibration_export.calibration_table``)."""
    cset = get_object_or_404(
        CalibrationSet.objects.select_related("judge_version__judge"), uuid=set_id
    )
    raw, version = request.GET.get("judge_version"), None
    if raw:
        version_id = uuid_parse(raw)
        if version_id is None:
            return HttpResponseBadRequest(
                f"judge_version: expected a UUID, got {value_shown(raw)}",
                content_type="text/plain; charset=utf-8",
            )
        version = get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)
    return table_download_response(
        request,
        lambda zone: calibration_table(calibration_set=cset, judge_version=version, zone=zone),
        f"calibration-{cset.uuid}",
    )


@require_GET
@role_required(*VIEWER_ROLES)
def grid_export(request: HttpRequest, suite_id) -> HttpResponse:
    """The grid of runs of a suite, one row per cell (``interop.grid_export.grid_table``), for
    the grid page's query (``runs``/``last``, ``tag``, ``change``, ``flaky``, ``sort``); what
    the user may not see while labeling is null."""
    suite = get_object_or_404(Suite, uuid=suite_id)
    try:
        query = GridQuery.from_params(request.GET, runs=request.GET.getlist("runs"))
    except DomainError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    return table_download_response(
        request,
        lambda zone: grid_table(suite=suite, query=query, viewer=request.user, zone=zone),
        f"grid-{suite.uuid}",
    )
