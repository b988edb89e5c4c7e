"""``POST /api/runs/prune``: deleting finished runs in batches (``evals.prune``), for leads."""

from __future__ import annotations

from datetime import timedelta

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.actors import Via
from core.api.fields import (
    StrictBooleanField,
    StrictFloatField,
    StrictIntegerField,
    StrictUUIDField,
)
from core.api.permissions import IsLead
from evals.api.runs._common import H
from evals.models import Suite
from evals.prune import BATCH_SIZE_MAX, runs_prune


class RunsPruneInput(serializers.Serializer):
    older_than_days = StrictFloatField(
        required=False,
        min_value=0.0,
        max_value=100_000.0,
        help_text="Only runs finished (else created) longer ago than this, in days.",
    )
    keep_last = StrictIntegerField(
        required=False,
        min_value=0,
        max_value=1_000_000,
        help_text="Keep each suite's N newest finished runs (by creation).",
    )
    suite = StrictUUIDField(required=False, help_text=H["suite"] + " Only this suite's runs.")
    runs = serializers.ListField(
        child=StrictUUIDField(),
        required=False,
        max_length=1000,
        help_text="Only these runs (UUIDs).",
    )
    dry_run = StrictBooleanField(help_text="true: say what would go and delete nothing.")
    batch_size = StrictIntegerField(
        required=False,
        default=5000,
        min_value=1,
        max_value=BATCH_SIZE_MAX,
        help_text="Trials deleted per transaction.",
    )

    def validate_older_than_days(self, value: float) -> float:
        if value <= 0:
            raise serializers.ValidationError("must be more than 0 days")
        return value

    def validate(self, attrs: dict) -> dict:
        if not {"older_than_days", "keep_last", "runs"} & attrs.keys():
            raise serializers.ValidationError(
                {"older_than_days": "say which runs to prune: older_than_days, keep_last or runs"}
            )
        return attrs


class RunsPruneApi(APIView):
    """POST: delete finished runs with their trials, grades, judge calls and stored reads, in
    batches of ``batch_size`` trials, each its own transaction (docs/operations.md,
    "Deleting old runs"). Leads only (403 otherwise; the command line ``runs_prune`` is the
    operator's). Filters combine; one of ``older_than_days``, ``keep_last``, ``runs`` is
    required. Runs held by a baseline, a top-up, a calibration set, human labels or work in
    progress are kept and counted in ``kept``. 200 with the report (``dry_run``, ``runs``,
    ``trials``, ``grades``, ``kept``, ``deleted``, ``batches``, ``bytes_estimate``,
    ``errors``: runs stopped half-way, left "pruning"); 400 on bad input naming the field;
    404 for an unknown suite or run. A request cut off part-way leaves whole batches deleted
    and the run "pruning": the next prune finishes it. Recorded per run (who, when, via)."""

    permission_classes = [IsLead]

    @extend_schema(
        request=RunsPruneInput,
        responses={
            200: OpenApiResponse(description="What was (or would be) deleted and kept."),
            400: OpenApiResponse(description="Bad input, naming the field."),
            403: OpenApiResponse(description="Not a lead."),
            404: OpenApiResponse(description="No such suite or run."),
        },
    )
    def post(self, request):
        body = RunsPruneInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        suite = None
        if "suite" in data:
            suite = get_object_or_404(Suite, uuid=data["suite"])
        days = data.get("older_than_days")
        runs = data.get("runs")
        report = runs_prune(
            older_than=None if days is None else timedelta(days=days),
            suite=suite,
            keep_last=data.get("keep_last"),
            run_uuids=None if runs is None else [str(u) for u in runs],
            dry_run=data["dry_run"],
            batch_size=data["batch_size"],
            by=request.user,
            via=Via.API,
        )
        return Response(report.as_json(), status=200)
