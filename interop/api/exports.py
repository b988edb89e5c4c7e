"""Downloads over the API: a run (CSV, Parquet or its export_run JSON file), its labels, a
comparison, a calibration set. Thin: parse, call one table builder, attach. Run and label
downloads hold what the requesting user may see (``evals.blindness``)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers
from rest_framework.views import APIView

from core.api.downloads import DownloadNegotiation, attachment, download_format
from core.api.fields import query_uuid_required
from core.api.permissions import IsRunner, IsViewer
from core.errors import DomainError
from core.http import uuid_or_404
from evals.api.comparisons import P_BASE, P_HEAD, run_or_404
from evals.api.grid import GRID_PARAMS
from evals.grid.build import GridQuery
from evals.models import Suite
from interop import exports
from interop.calibration_export import calibration_table
from interop.exports import table_download
from interop.grid_export import grid_table
from interop.run_file import run_export_json
from judges.models import JudgeRun
from labeling.api.sets import version_param
from labeling.models import CalibrationSet

P_RUN_ID = OpenApiParameter(
    "run_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the run."
)


P_TZ = OpenApiParameter(
    "tz",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="IANA time zone of the exported times (default UTC).",
)


RUN_FORMATS = (*exports.FORMATS, "json")


def _format_param(formats: tuple[str, ...]) -> OpenApiParameter:
    return OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        enum=list(formats),
        description="File format; default csv.",
    )


def _file_responses(formats: tuple[str, ...]) -> dict:
    types = {**exports.CONTENT_TYPES, "json": "application/json"}
    out: dict = {(200, types[f].split(";")[0]): OpenApiTypes.BINARY for f in formats}
    out[400] = OpenApiResponse(description="Bad format or tz, named.")
    out[404] = OpenApiResponse(description="No run with that UUID.")
    return out


class DownloadApi(APIView):
    permission_classes = [IsViewer]
    content_negotiation_class = DownloadNegotiation


class RunExportApi(DownloadApi):
    """GET: a run as CSV or Parquet, one row per trial (``exports.run_table``), or as the
    JSON baseline file of ``manage.py export_run`` (``?format=json``, same bytes; only for
    a finished run, else 409; ``?outputs=false`` leaves output text out)."""

    @extend_schema(
        parameters=[
            P_RUN_ID,
            _format_param(RUN_FORMATS),
            P_TZ,
            OpenApiParameter(
                "outputs",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                enum=["true", "false"],
                description="json only: include output text (default true).",
            ),
        ],
        responses={
            **_file_responses(RUN_FORMATS),
            409: OpenApiResponse(description="json: the run is not finished."),
        },
    )
    def get(self, request, run_id):
        run = run_or_404(run_id)
        fmt = download_format(request, RUN_FORMATS)
        if fmt != "json":
            return table_download(
                request,
                lambda zone: exports.run_table(run=run, zone=zone, viewer=request.user),
                f"run-{run.uuid}",
            )
        outputs = request.query_params.get("outputs", "true")
        if outputs not in ("true", "false"):
            raise serializers.ValidationError(
                {"outputs": [f"expected true or false, got {outputs[:100]!r}"]}
            )
        if not run.is_terminal:
            raise DomainError(f"run {run} is {run.status}: export a finished run", code="conflict")
        text = run_export_json(run=run, outputs=outputs == "true", viewer=request.user) + "\n"
        return attachment(text.encode("utf-8"), "application/json", f"run-{run.uuid}.json")


class LabelsExportApi(DownloadApi):
    """GET: the labels on a run's trials as CSV or Parquet (``exports.labels_table``)."""

    @extend_schema(
        parameters=[P_RUN_ID, _format_param(exports.FORMATS), P_TZ],
        responses=_file_responses(exports.FORMATS),
    )
    def get(self, request, run_id):
        run = run_or_404(run_id)
        return table_download(
            request,
            lambda zone: exports.labels_table(run=run, zone=zone, viewer=request.user),
            f"labels-{run.uuid}",
        )


class PreferencesExportApi(DownloadApi):
    """GET: the human preference labels on a pairwise judge run's pairs as CSV or Parquet
    (``exports.preferences_table``; a reviewer gets only their own); 400 for a judge run
    that is not pairwise."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "judge_run_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description="UUID of the pairwise judge run.",
            ),
            _format_param(exports.FORMATS),
            P_TZ,
        ],
        responses=_file_responses(exports.FORMATS),
    )
    def get(self, request, judge_run_id):
        judge_run = get_object_or_404(JudgeRun, uuid=uuid_or_404(judge_run_id, "judge run"))
        return table_download(
            request,
            lambda zone: exports.preferences_table(
                judge_run=judge_run, zone=zone, viewer=request.user
            ),
            f"preferences-{judge_run.uuid}",
        )


class ComparisonExportApi(DownloadApi):
    """GET ``?base=&head=&format=csv|parquet``: a comparison, one row per case
    (``exports.comparison_table``)."""

    @extend_schema(
        parameters=[P_BASE, P_HEAD, _format_param(exports.FORMATS), P_TZ],
        responses=_file_responses(exports.FORMATS),
    )
    def get(self, request):
        base_id, head_id = (
            query_uuid_required(request, "base"),
            query_uuid_required(request, "head"),
        )
        base, head = run_or_404(base_id), run_or_404(head_id)
        return table_download(
            request,
            lambda zone: exports.comparison_table(base=base, head=head),
            f"comparison-{base.uuid}-{head.uuid}",
        )


class CalibrationExportApi(APIView):
    """GET: the calibration export of a set
    (``interop.calibration_export.calibration_table``) as CSV or Parquet; engineers and
    leads (it holds judge verdicts and every label)."""

    permission_classes = [IsRunner]
    content_negotiation_class = DownloadNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "set_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description="UUID of the calibration set.",
            ),
            OpenApiParameter(
                "format",
                str,
                enum=list(exports.FORMATS),
                description="File format (default csv); anything else: 400.",
            ),
            OpenApiParameter(
                "tz",
                str,
                description="IANA time zone of the label times (default UTC); unknown: 400.",
            ),
            OpenApiParameter(
                "judge_version",
                OpenApiTypes.UUID,
                description="Whose verdicts (UUID; default: the set's own "
                "judge version). Unknown: 404.",
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            400: OpenApiResponse(description="Bad format, tz or judge_version."),
            404: OpenApiResponse(description="Unknown set or judge version."),
        },
    )
    def get(self, request, set_id):
        cset = get_object_or_404(
            CalibrationSet.objects.select_related("judge_version__judge"), uuid=set_id
        )
        version = version_param(request)
        return table_download(
            request,
            lambda zone: calibration_table(calibration_set=cset, judge_version=version, zone=zone),
            f"calibration-{cset.uuid}",
        )


class GridExportApi(DownloadApi):
    """GET: the grid of runs of a suite as CSV or Parquet, one row per cell
    (``interop.grid_export.grid_table``), for the grid's query parameters."""

    @extend_schema(
        parameters=[*GRID_PARAMS[:7], _format_param(exports.FORMATS), P_TZ],
        responses=_file_responses(exports.FORMATS),
    )
    def get(self, request, suite_id):
        suite = get_object_or_404(Suite, uuid=uuid_or_404(suite_id, "suite"))
        query = GridQuery.from_params(
            request.query_params, runs=request.query_params.getlist("runs")
        )
        return table_download(
            request,
            lambda zone: grid_table(suite=suite, query=query, viewer=request.user, zone=zone),
            f"grid-{suite.uuid}",
        )
