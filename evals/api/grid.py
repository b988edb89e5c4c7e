"""The grid of runs and a case's history as JSON (``evals.grid``), the pages' data. Thin.

``GET /api/suites/<uuid>/grid``: columns oldest first and rows a cursor page at a time;
``GET /api/suites/<uuid>/cases/<uuid>/history``. Blind parts are withheld as on the pages."""

from __future__ import annotations

import base64
import binascii

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.pagination import IdCursorPagination
from core.api.permissions import IsViewer
from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from core.http import uuid_or_404
from evals.api.runs.detail import RunStatusShownSerializer
from evals.grid.build import GRID_CHANGES, MAX_RUNS, SORTS, GridQuery, grid_get
from evals.grid.history import case_history_get
from evals.models import Case, Suite

RATE = "fraction in [0, 1]"


class QualitySerializer(serializers.Serializer):
    finished = serializers.IntegerField(help_text="Finished trials (ok or pipeline error).")
    cost_unknown = serializers.IntegerField(help_text="Finished trials whose cost is unknown.")
    cost_usd = serializers.DecimalField(
        COST_USD_MAX_DIGITS + 4,
        COST_USD_DECIMAL_PLACES,
        allow_null=True,
        help_text="Total cost (USD); null when any cost is unknown.",
    )
    cost_per_trial_usd = serializers.DecimalField(
        24, 12, allow_null=True, help_text="Cost per finished trial (USD); null when unknown."
    )
    cost_per_passing_trial_usd = serializers.DecimalField(
        24, 12, allow_null=True, help_text="Cost per passing trial (USD); null when unknown."
    )
    pass_rate = serializers.FloatField(allow_null=True, help_text=f"Pass rate, {RATE}.")
    pass_rate_low = serializers.FloatField(allow_null=True, help_text="95% interval, low.")
    pass_rate_high = serializers.FloatField(allow_null=True, help_text="95% interval, high.")
    pass_rate_per_usd = serializers.FloatField(
        allow_null=True, help_text="Pass rate / cost per trial (per USD); null when undefined."
    )
    pass_rate_per_usd_low = serializers.FloatField(
        allow_null=True, help_text="Pass rate's 95% low bound / cost per trial."
    )
    pass_rate_per_usd_high = serializers.FloatField(
        allow_null=True, help_text="Pass rate's 95% high bound / cost per trial."
    )
    note = serializers.CharField(help_text="Why a figure is undefined; empty when all are.")


class ColumnSerializer(serializers.Serializer):
    status_shown = RunStatusShownSerializer(
        help_text="The status the grid shows (evals.run_status): an imported run shows "
        "imported, with its errored trials and whether it is partial."
    )
    uuid = serializers.CharField(help_text="UUID of the run.")
    name = serializers.CharField(help_text="Name of the run.")
    created_at = serializers.DateTimeField(help_text="When the run was created.")
    status = serializers.CharField(help_text="Status of the run.")
    is_baseline = serializers.BooleanField(help_text="The suite's current baseline.")
    hidden = serializers.BooleanField(
        help_text="The run holds a trial blind for you: its pass rate and cost are withheld."
    )
    quality = QualitySerializer(
        allow_null=True, help_text="Pass rate and cost against quality; null when hidden."
    )


class CellSerializer(serializers.Serializer):
    passed = serializers.IntegerField(help_text="Trials whose overall verdict is pass.")
    graded = serializers.IntegerField(help_text="Trials graded pass or fail.")
    errored = serializers.IntegerField(help_text="Errored trials left out (pipeline, grade).")
    trials = serializers.IntegerField(help_text="Trials of the case in the run.")
    rate = serializers.FloatField(allow_null=True, help_text=f"passed / graded, {RATE}.")
    low = serializers.FloatField(allow_null=True, help_text="Wilson 95% interval, low.")
    high = serializers.FloatField(allow_null=True, help_text="Wilson 95% interval, high.")
    flaky = serializers.BooleanField(help_text="0 < passed < graded.")
    hidden = serializers.BooleanField(help_text="Blind for you while you label: no figures.")


class RowSerializer(serializers.Serializer):
    case_uuid = serializers.CharField(help_text="UUID of the case.")
    key = serializers.CharField(help_text="Key of the case.")
    tags = serializers.ListField(child=serializers.CharField(), help_text="Tags of the case.")
    cells = serializers.ListField(
        child=CellSerializer(allow_null=True),
        help_text="One per column; null where the case did not run.",
    )
    mean_rate = serializers.FloatField(allow_null=True, help_text="Mean of the cells' rates.")
    variance = serializers.FloatField(
        allow_null=True, help_text="Population variance of the rates across runs (2+ rates)."
    )
    flaky_any = serializers.BooleanField(help_text="Flaky in at least one run.")
    change = serializers.CharField(
        help_text='Change class from the first to the last graded run; "graders differ" when '
        "those two runs gate on different graders (their rates are not comparable)."
    )


class GridSerializer(serializers.Serializer):
    suite = serializers.CharField(help_text="UUID of the suite.")
    columns = ColumnSerializer(many=True, help_text="The runs, oldest first.")
    n_cases = serializers.IntegerField(help_text="Cases before filters.")
    n_rows = serializers.IntegerField(help_text="Rows after filters (all pages).")
    hidden_cells = serializers.IntegerField(help_text="Cells withheld while you label.")
    grader_warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="One sentence per run graded by another grader set than the newest run: "
        "the graders it lacks, adds or configures differently. Empty when all agree.",
    )
    next = serializers.CharField(allow_null=True, help_text="URL of the next page of rows.")
    previous = serializers.CharField(allow_null=True, help_text="URL of the previous page.")
    results = RowSerializer(many=True, help_text="This page's rows.")


def _param(name: str, description: str, **kw) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.STR, OpenApiParameter.QUERY, description=description, **kw
    )


GRID_PARAMS = [
    OpenApiParameter(
        "suite_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the suite."
    ),
    _param("runs", f"Run UUIDs of the suite, comma-separated or repeated (at most {MAX_RUNS})."),
    _param("last", f"Without runs: the last N runs (1..{MAX_RUNS}, default 10)."),
    _param("tag", "Only cases with this tag."),
    _param("change", "Only cases of this change class.", enum=list(GRID_CHANGES)),
    _param("flaky", "true: only cases flaky in some run."),
    _param("sort", "Row order.", enum=list(SORTS)),
    _param("cursor", "Opaque cursor from a page's next or previous link."),
    _param("page_size", "Rows per page: default 50, at most 100."),
]


def _offset(raw: str | None) -> int:
    if not raw:
        return 0
    try:
        text = base64.urlsafe_b64decode(raw.encode("ascii")).decode("ascii")
        if not text.startswith("o=") or not text[2:].isdigit():
            raise ValueError(text)
        return int(text[2:])
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise serializers.ValidationError({"cursor": ["not a cursor of this list"]}) from exc


def _cursor_url(request, offset: int) -> str:
    params = request.query_params.copy()
    params["cursor"] = base64.urlsafe_b64encode(f"o={offset}".encode("ascii")).decode("ascii")
    return request.build_absolute_uri(f"{request.path}?{params.urlencode()}")


class SuiteGridApi(APIView):
    """GET: the grid of runs of a suite (module docstring); 400 naming ``runs`` or ``last``
    for a bad choice of runs, 404 for a run that is not of the suite."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=GRID_PARAMS,
        responses={
            200: GridSerializer,
            400: OpenApiResponse(description="Bad runs, last, cursor or page_size, named."),
            404: OpenApiResponse(description="No such suite, or a run not of this suite."),
        },
    )
    def get(self, request, suite_id):
        suite = get_object_or_404(Suite, uuid=uuid_or_404(suite_id, "suite"))
        query = GridQuery.from_params(
            request.query_params, runs=request.query_params.getlist("runs")
        )
        grid = grid_get(suite=suite, query=query, viewer=request.user)
        size = IdCursorPagination().get_page_size(request)
        start = _offset(request.query_params.get("cursor"))
        page = grid.rows[start : start + size]
        data = {
            "suite": str(suite.uuid),
            "columns": grid.columns,
            "n_cases": grid.n_cases,
            "n_rows": len(grid.rows),
            "hidden_cells": grid.hidden_cells,
            "grader_warnings": list(grid.grader_warnings),
            "next": _cursor_url(request, start + size) if start + size < len(grid.rows) else None,
            "previous": _cursor_url(request, max(0, start - size)) if start else None,
            "results": [_row(r) for r in page],
        }
        return Response(GridSerializer(data).data)


def _row(row) -> dict:
    return {
        "case_uuid": row.case_uuid,
        "key": row.key,
        "tags": list(row.tags),
        "cells": [None if c is None else {**c._asdict(), "flaky": c.flaky} for c in row.cells],
        "mean_rate": row.mean_rate,
        "variance": row.variance,
        "flaky_any": row.flaky_any,
        "change": row.change,
    }


class HistoryTrialSerializer(serializers.Serializer):
    uuid = serializers.CharField(help_text="UUID of the trial (its page: /trials/<uuid>/).")
    attempt = serializers.IntegerField(help_text="Attempt number, 1..N.")
    status = serializers.CharField(help_text="Status of the trial.")
    verdict = serializers.CharField(
        help_text="Overall verdict: pass, fail, errored grade, pipeline error; empty if none."
    )


class HistoryRunSerializer(serializers.Serializer):
    status_shown = RunStatusShownSerializer(
        help_text="The status the page shows (evals.run_status)."
    )
    run_uuid = serializers.CharField(help_text="UUID of the run.")
    run_name = serializers.CharField(help_text="Name of the run.")
    created_at = serializers.DateTimeField(help_text="When the run was created.")
    status = serializers.CharField(help_text="Status of the run.")
    is_baseline = serializers.BooleanField(help_text="The suite's current baseline.")
    passed = serializers.IntegerField(help_text="Trials whose overall verdict is pass.")
    graded = serializers.IntegerField(help_text="Trials graded pass or fail.")
    rate = serializers.FloatField(allow_null=True, help_text=f"passed / graded, {RATE}.")
    low = serializers.FloatField(allow_null=True, help_text="Wilson 95% interval, low.")
    high = serializers.FloatField(allow_null=True, help_text="Wilson 95% interval, high.")
    flaky = serializers.BooleanField(help_text="0 < passed < graded.")
    hidden = serializers.BooleanField(help_text="Blind for you while you label: no figures.")
    trials = HistoryTrialSerializer(many=True, help_text="The case's trials in the run.")


class CaseHistorySerializer(serializers.Serializer):
    case = serializers.CharField(help_text="UUID of the case.")
    key = serializers.CharField(help_text="Key of the case.")
    flaky_runs = serializers.IntegerField(help_text="Runs where the case was flaky.")
    graded_runs = serializers.IntegerField(help_text="Runs with a graded trial of the case.")
    runs = HistoryRunSerializer(
        many=True, help_text="Every run of the suite that ran it, newest first."
    )


class CaseHistoryApi(APIView):
    """GET: a case in every run of its suite, newest first, with its trials."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "suite_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description="UUID of the suite.",
            ),
            OpenApiParameter(
                "case_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the case."
            ),
        ],
        responses={200: CaseHistorySerializer, 404: OpenApiResponse(description="No such case.")},
    )
    def get(self, request, suite_id, case_id):
        case = get_object_or_404(
            Case.objects.select_related("suite"),
            uuid=uuid_or_404(case_id, "case"),
            suite__uuid=uuid_or_404(suite_id, "suite"),
        )
        history = case_history_get(case=case, viewer=request.user)
        data = {
            "case": str(case.uuid),
            "key": case.key,
            "flaky_runs": history.flaky_runs,
            "graded_runs": history.graded_runs,
            "runs": history.runs,
        }
        return Response(CaseHistorySerializer(data).data)
