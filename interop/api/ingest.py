"""``POST /api/ingest``: bulk ingest of a run recorded elsewhere (``interop.ingest``;
docs/ingest.md). The view reads the raw request stream, never ``request.body``/``data``, so
the limits are ``ASSAY["INGEST_MAX_BYTES"]`` and ``ASSAY["INGEST_MAX_RECORD_BYTES"]``, not
``DATA_UPLOAD_MAX_MEMORY_SIZE``; a JSON document over ``BODY_MAX_BYTES["ingest_json"]`` is
refused before it is read.
"""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsRunner
from core.bounds import (
    COST_USD_DECIMAL_PLACES,
    COST_USD_MAX_DIGITS,
    INT_MAX,
    LATENCY_MS_MAX,
    body_limit_bytes,
    body_too_large_text,
)
from core.http import content_length
from evals.api.runs.detail import RunStatusShownSerializer
from evals.models import Run
from evals.run_status import run_status_shown
from interop.importers.context import retired_cases_shown
from interop.ingest.sources import source_open
from interop.ingest.submit import ingest_submit

MEDIA_TYPES = {
    "application/json": "json",
    "application/x-ndjson": "ndjson",
    "application/jsonl": "ndjson",
}
KEY_MAX = 255
JSON_TOO_LARGE_HINT = (
    " for one JSON document (application/json is parsed whole): send a larger run as NDJSON "
    "(Content-Type: application/x-ndjson, one record a line, read as it streams)"
)


class _SchemaOnlyParser(BaseParser):
    """Names an accepted media type for the schema and reads nothing: ``request.POST`` may still
    be asked for (a session's CSRF check), and the stream must stay unread."""

    def parse(self, stream, media_type=None, parser_context=None) -> dict:
        return {}


class _JsonParser(_SchemaOnlyParser):
    media_type = "application/json"


class _NdjsonParser(_SchemaOnlyParser):
    media_type = "application/x-ndjson"


class _JsonlParser(_SchemaOnlyParser):
    media_type = "application/jsonl"


class IngestLabelInput(serializers.Serializer):
    reviewer = serializers.CharField(
        max_length=200,
        help_text="Reviewer name (text; no user account needed), at most 200 characters.",
    )
    verdict = serializers.ChoiceField(
        choices=["pass", "fail"], help_text="The reviewer's verdict: pass or fail."
    )
    critique = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="Why (free text; null = none)."
    )


class IngestTrialInput(serializers.Serializer):
    """A trial record: the CSV/JSONL import's fields (interop.importers.tabular)."""

    case_id = serializers.CharField(max_length=200, help_text="Case key, at most 200 characters.")
    input = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Case input (string or object); empty = a case already in the suite.",
    )
    expected = serializers.JSONField(
        required=False, allow_null=True, help_text="Expected answer (any JSON) or null."
    )
    tags = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_null=True,
        help_text="Case tags (strings).",
    )
    output = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        help_text="The trial output (text, stored whole).",
    )
    status = serializers.ChoiceField(
        choices=["ok", "error", "cancelled"],
        required=False,
        allow_null=True,
        help_text="The trial's status (default ok). error: the pipeline failed, an errored "
        "trial that carries no verdict (never graded, never a pass); queued, running and "
        "anything else are refused.",
    )
    error = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="What went wrong: required with status error, refused with ok (at most "
        "100,000 characters).",
    )
    error_message = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="The same as error, its older name (give one, not both).",
    )
    attempt = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Attempt number 1..N (default 1)."
    )
    passed = serializers.BooleanField(
        required=False, allow_null=True, help_text="Verdict: true or false only."
    )
    score = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="Score in [0, 1]; null, NaN or Infinity = not "
        "scored (an errored grade, never 0).",
    )
    scores = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        required=False,
        allow_null=True,
        help_text="Grader name -> score in [0, 1]; one grade each.",
    )
    judge_status = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="ok (or empty) = graded; anything else makes the record's grades errored.",
    )
    reason = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="The grade's reason (text)."
    )
    grader = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Grader name of passed/score (default 'imported').",
    )
    model = serializers.CharField(required=False, allow_null=True, help_text="Model name.")
    input_tokens = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=INT_MAX,
        help_text="Prompt tokens (count, at most 2,147,483,647).",
    )
    output_tokens = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=INT_MAX,
        help_text="Completion tokens (count, at most 2,147,483,647).",
    )
    latency_ms = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=LATENCY_MS_MAX,
        help_text="Latency of the call (milliseconds, from 0 to 86,400,000: one day).",
    )
    cost_usd = serializers.DecimalField(
        max_digits=COST_USD_MAX_DIGITS,
        decimal_places=COST_USD_DECIMAL_PLACES,
        required=False,
        allow_null=True,
        help_text="Cost in USD (decimal string or number; null = unknown, never 0).",
    )
    created_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="ISO 8601; without an offset read as UTC."
    )
    labels = IngestLabelInput(
        many=True, required=False, allow_null=True, help_text="Human labels of this trial."
    )
    extra = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="Anything else, kept in the trial's raw_response.",
    )


class IngestInput(serializers.Serializer):
    """The JSON body; an NDJSON body is the same header object on line 1 (without
    ``trials``) and one IngestTrialInput per line."""

    suite = serializers.CharField(
        max_length=200, help_text="Suite name (created when absent), at most 200 characters."
    )
    suite_kind = serializers.ChoiceField(
        choices=["regression", "capability"],
        required=False,
        allow_null=True,
        help_text="Kind of a new suite (default regression); must match an existing one.",
    )
    run = serializers.CharField(max_length=200, help_text="Run name, new in its suite.")
    model = serializers.CharField(
        max_length=200, required=False, allow_null=True, help_text="Model name of the run."
    )
    source_version = serializers.CharField(
        max_length=200,
        required=False,
        allow_null=True,
        help_text="Version label of the system under test.",
    )
    threshold = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="Pass threshold in [0, 1] for records with a score and no passed verdict.",
    )
    run_key = serializers.CharField(
        max_length=255,
        required=False,
        allow_null=True,
        help_text="Idempotency key (as the Idempotency-Key header).",
    )
    trials = IngestTrialInput(many=True, help_text="The trial records (at least one).")


class IngestCountsOutput(serializers.Serializer):
    cases = serializers.IntegerField(help_text="Distinct cases used (created or reused).")
    trials = serializers.IntegerField(help_text="Trials written (count).")
    grades = serializers.IntegerField(help_text="Grades written (count).")
    labels = serializers.IntegerField(help_text="Labels written (count).")


class IngestOutput(serializers.Serializer):
    run = serializers.UUIDField(help_text="UUID of the new run.")
    name = serializers.CharField(help_text="Run name.")
    suite = serializers.UUIDField(help_text="UUID of the suite.")
    suite_name = serializers.CharField(help_text="Suite name.")
    status = serializers.CharField(
        help_text="The run's stored status (succeeded: the import finished)."
    )
    status_shown = RunStatusShownSerializer(
        help_text="The status every page shows: imported, with its errored trials and "
        "whether it is partial (evals.run_status)."
    )
    counts = IngestCountsOutput(help_text="What was written.")
    retired_cases = serializers.ListField(
        child=serializers.CharField(),
        help_text="Keys of the suite's cases this import retired (the file gave the key new "
        "content, so a new case replaced the old one); sorted, at most 100 (see "
        "retired_count). Empty: nothing was retired.",
    )
    retired_count = serializers.IntegerField(help_text="Cases retired by this import (count).")
    url = serializers.URLField(help_text="API URL of the run (its report included).")
    page = serializers.URLField(help_text="Web page of the run.")


class IngestErrorOutput(serializers.Serializer):
    detail = serializers.CharField(help_text="What is wrong, naming the record and field.")
    record = serializers.IntegerField(
        allow_null=True,
        help_text="JSON: index in trials "
        "(0-based); NDJSON: line number (1-based); null: the "
        "body or a JSON header.",
    )
    field = serializers.CharField(allow_null=True, help_text="Dotted field name, or null.")
    limit = serializers.IntegerField(
        required=False, help_text="413 only: the limit exceeded (bytes)."
    )
    key = serializers.CharField(required=False, help_text="409 only: the idempotency key.")


def _error(status: int, detail: str, *, record=None, field=None, **more) -> Response:
    return Response({"detail": detail, "record": record, "field": field, **more}, status=status)


class IngestApi(APIView):
    """POST a whole run recorded elsewhere (JSON or NDJSON); all or nothing; idempotent
    under ``Idempotency-Key`` or ``run_key``. 201 with the run; a repeat returns the first
    response (header ``Idempotent-Replayed: true``); 400 names the record and field; 409
    key reused with another body; 411 no Content-Length; 413 over a size limit; 415 other
    content types."""

    permission_classes = [IsRunner]
    parser_classes = [_JsonParser, _NdjsonParser, _JsonlParser]
    body_limit = "ingest_json"  # application/json only (core.api.limits); NDJSON streams
    body_limit_hint = JSON_TOO_LARGE_HINT

    @extend_schema(
        request={
            "application/json": IngestInput,
            "application/x-ndjson": OpenApiTypes.STR,
            "application/jsonl": OpenApiTypes.STR,
        },
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="At most 255 characters; a repeat with the same body returns the "
                "first response and writes nothing.",
            )
        ],
        responses={
            201: IngestOutput,
            400: IngestErrorOutput,
            409: IngestErrorOutput,
            411: IngestErrorOutput,
            413: IngestErrorOutput,
            415: OpenApiResponse(IngestErrorOutput, description="Other content type"),
        },
    )
    def post(self, request: Request) -> Response:
        raw = request._request  # Django's HttpRequest: the unread WSGI stream
        media = (raw.content_type or "").lower()
        fmt = MEDIA_TYPES.get(media)
        if fmt is None:
            return _error(
                415,
                f"Content-Type {media or '(none)'!r} is not accepted; send "
                f"{', '.join(MEDIA_TYPES)}",
            )
        charset = (raw.content_params or {}).get("charset")
        if charset is not None and charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
            return _error(415, f"charset {charset!r}: the body must be UTF-8")
        limits = settings.ASSAY
        max_bytes = limits["INGEST_MAX_BYTES"]
        length = content_length(raw)
        if length is None:
            return _error(411, "Content-Length is required")
        if length > max_bytes:
            return _error(
                413,
                f"request body: {length:,} bytes, over the limit of "
                f"{max_bytes:,} bytes (ASSAY INGEST_MAX_BYTES)",
                limit=max_bytes,
            )
        if fmt == "json" and int(length) > (json_max := body_limit_bytes("ingest_json")):
            # One JSON document is parsed whole (up to ~46 bytes of memory a byte): refused
            # before reading; NDJSON is read a record at a time.
            return _error(
                413,
                body_too_large_text(int(length), json_max, hint=JSON_TOO_LARGE_HINT),
                limit=json_max,
            )
        key = raw.headers.get("Idempotency-Key")
        if key is not None and not (0 < len(key) <= KEY_MAX):
            return _error(
                400,
                f"header Idempotency-Key: expected 1 to {KEY_MAX} characters",
                field="Idempotency-Key",
            )

        def respond(run: Run, summary) -> dict:
            return {
                "run": str(run.uuid),
                "name": run.name,
                "suite": str(run.suite.uuid),
                "suite_name": run.suite.name,
                "status": run.status,
                "status_shown": run_status_shown(run).as_json(),
                "counts": {
                    "cases": summary.cases,
                    "trials": summary.trials,
                    "grades": summary.grades,
                    "labels": summary.labels,
                },
                "retired_cases": retired_cases_shown(summary.retired_cases),
                "retired_count": len(summary.retired_cases),
                "url": request.build_absolute_uri(
                    reverse("api:run-detail", kwargs={"uuid": run.uuid})
                ),
                "page": request.build_absolute_uri(run.get_absolute_url()),
            }

        # A refused body is a DomainError: 400 naming the record and field, 409 for a key
        # reused with another body, 413 over a limit (core.api.errors).
        source = source_open(
            fmt=fmt,
            stream=raw,
            max_bytes=max_bytes,
            max_record_bytes=limits["INGEST_MAX_RECORD_BYTES"],
        )
        outcome = ingest_submit(
            source=source, user=request.user, idempotency_key=key, respond=respond
        )
        response = Response(outcome.body, status=outcome.status)
        if outcome.replayed:
            response["Idempotent-Replayed"] = "true"
        return response
