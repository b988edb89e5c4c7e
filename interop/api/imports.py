"""``POST /api/imports``: import a results file (promptfoo, Inspect AI, labeled records,
CSV, JSONL) as a new run, the same import as the upload page and ``import_results``.

Thin: check the size, parse the multipart form, call ``interop.importers.results_import``
(one transaction, all or nothing), render its ``ImportSummary``. Reference: docs/interop.md.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsRunner
from core.http import content_length
from evals.models import Suite
from interop.importers import FORMATS, mapping_parse, results_import

# The largest file accepted, in bytes (64 MiB; settings.ASSAY["IMPORT_MAX_BYTES"] overrides).
# promptfoo and Inspect files are parsed whole, so the limit bounds the memory one import uses.
IMPORT_MAX_BYTES = 64 * 1024 * 1024
# Room for the other form fields and the multipart boundaries, on top of the file's limit.
FORM_OVERHEAD_BYTES = 64 * 1024


def import_max_bytes() -> int:
    """The file size limit in bytes (``ASSAY["IMPORT_MAX_BYTES"]``, default 64 MiB)."""
    return int(getattr(settings, "ASSAY", {}).get("IMPORT_MAX_BYTES", IMPORT_MAX_BYTES))


class ImportInput(serializers.Serializer):
    file = serializers.FileField(
        help_text="The results file (UTF-8): a promptfoo results.json, an Inspect AI JSON log, "
        "labeled records, CSV or JSONL; at most 64 MiB (413 above)."
    )
    format = serializers.ChoiceField(
        choices=FORMATS,
        required=False,
        allow_blank=True,
        default="",
        help_text=f"One of {', '.join(FORMATS)}; empty or absent: detected from the content.",
    )
    suite = serializers.CharField(
        max_length=200, help_text="Suite name (at most 200 characters); created when missing."
    )
    run = serializers.CharField(
        max_length=196,
        help_text="A new run name in that suite (at most 196 "
        "characters); an existing name is refused.",
    )
    suite_kind = serializers.ChoiceField(
        choices=Suite.Kind.values, default=Suite.Kind.REGRESSION, help_text="Kind of a new suite."
    )
    mapping = serializers.ListField(
        child=serializers.CharField(help_text="field=column"),
        required=False,
        default=list,
        help_text="CSV/JSONL only: repeated field=column items, e.g. case_id=id.",
    )
    threshold = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=1,
        help_text="CSV/JSONL only: pass threshold in [0, 1] for rows with a score but no verdict.",
    )


class ImportOutput(serializers.Serializer):
    suite = serializers.CharField(help_text="Suite name.")
    runs = serializers.ListField(
        child=serializers.CharField(),
        help_text="Names of the runs created (two for pairwise labeled records).",
    )
    run_ids = serializers.ListField(
        child=serializers.UUIDField(), help_text="UUIDs of those runs, in the same order."
    )
    format = serializers.CharField(help_text="The format imported (given or detected).")
    cases = serializers.IntegerField(help_text="Distinct cases touched (count).")
    trials = serializers.IntegerField(help_text="Trials created (count).")
    grades = serializers.IntegerField(help_text="Grades created (count).")
    labels = serializers.IntegerField(help_text="Labels created (count).")
    preference_labels = serializers.IntegerField(help_text="Preference labels created (count).")
    pairwise_verdicts = serializers.IntegerField(help_text="Pairwise verdicts created (count).")
    judge_versions = serializers.IntegerField(help_text="Recorded judge versions used (count).")
    retired_cases = serializers.ListField(
        child=serializers.CharField(),
        help_text="Keys of the suite's cases this import retired (the file gave the key new "
        "content, so a new case replaced the old one); sorted, at most 100 (see "
        "retired_count). Empty: nothing was retired.",
    )
    retired_count = serializers.IntegerField(help_text="Cases retired by this import (count).")


class ImportErrorOutput(serializers.Serializer):
    detail = serializers.CharField(
        help_text="What is wrong, naming the record (JSON path, "
        "line or row) and the field. Nothing was written."
    )
    limit = serializers.IntegerField(
        required=False, help_text="413 only: the file size limit (bytes)."
    )


def _too_large(limit: int, what: str) -> Response:
    return Response(
        {
            "detail": f"{what}, over the limit of {limit:,} bytes (ASSAY "
            "IMPORT_MAX_BYTES); nothing was imported",
            "limit": limit,
        },
        status=413,
    )


class ImportApi(APIView):
    """POST a results file as multipart form data; 201 with the import summary; 400 naming
    the record and field (nothing written); 413 over the size limit; 415 not multipart.
    Engineers and leads only (the roles of the upload page)."""

    permission_classes = [IsRunner]
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": ImportInput},
        responses={
            201: ImportOutput,
            413: ImportErrorOutput,
            400: OpenApiResponse(
                description='Bad file: {"detail"} naming the record (JSON path, line or row) '
                'and the field; bad form fields: {"<field>": [messages]}. Nothing '
                "was written."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        limit = import_max_bytes()
        length = content_length(request)
        if length is not None and length > limit + FORM_OVERHEAD_BYTES:
            return _too_large(limit, f"request body: {length:,} bytes")
        data = ImportInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        upload = v["file"]
        if upload.size > limit:
            return _too_large(limit, f"file: {upload.size:,} bytes")
        summary = results_import(
            stream=upload.file,
            filename=upload.name,
            suite_name=v["suite"],
            run_name=v["run"],
            fmt=v["format"] or None,
            mapping=mapping_parse(v["mapping"]),
            suite_kind=v["suite_kind"],
            threshold=v["threshold"],
            user=request.user,
        )
        return Response(summary.as_json(), status=201)
