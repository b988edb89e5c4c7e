"""A run's actions: start, retry its errored trials, cancel."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.actors import Via
from core.api.fields import StrictCharField, StrictIntegerField, StrictUUIDField
from core.api.permissions import IsRunner
from core.errors import DomainError
from core.http import uuid_or_404
from evals.api.runs._common import H
from evals.api.runs.detail import RunSerializer
from evals.models import Run, Suite
from evals.runner import start as services
from evals.runner.finalize import run_cancel
from evals.runner.retry import run_retry
from evals.runner.start import DEFAULT_TRIALS_PER_CASE, MAX_TRIALS_PER_CASE


class RunStartedSerializer(RunSerializer):
    warning = serializers.SerializerMethodField(
        help_text="Present when some of the run's task messages wait for an unreachable "
        "broker: the run is saved and starts by itself once the broker is back."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "warning"]

    def get_warning(self, run) -> str:
        return services.run_publish_warning(run=run)


def _started(run: Run, status: int) -> Response:
    """The run answering a start or retry, with ``warning`` when its messages await the broker."""
    data = RunStartedSerializer(run).data
    if not data["warning"]:
        del data["warning"]
    return Response(data, status=status)


class RunStartInput(serializers.Serializer):
    suite = StrictUUIDField(help_text=H["suite"])
    name = StrictCharField(max_length=200, help_text="Run name, unique in its suite.")
    target = serializers.JSONField(
        help_text="Target configuration ({kind, ...}). An openai target's prompt_template "
        "fills $input, $expected, $context, $key, $tags and $attempt (also ${input}; $$ is a "
        "literal $; braces are plain text) and must use one of $input, $expected, $context, "
        "$key; {input} is refused. Its api_key_env is the name of the environment variable "
        "holding the endpoint's key on the workers (default OPENAI_API_KEY; it must match "
        "[A-Z][A-Z0-9_]*_API_KEY), or null for an endpoint that takes no key (no "
        "Authorization header); a value that looks like a key (sk-...) is refused naming "
        "target.api_key_env. Retries and top-ups use the same variable, or none. Its provider "
        'is "openai" (the default: chat completions), "anthropic" (the Messages API: '
        "settings.max_tokens required, default api_key_env ANTHROPIC_API_KEY, no tools) or "
        '"azure" (Azure OpenAI: deployment and api_version required, default api_key_env '
        "AZURE_OPENAI_API_KEY)."
    )
    graders = serializers.JSONField(
        help_text="Grader set: list of {key, kind, config}. A judge grader's config names its "
        "version by judge_version (a UUID, JUDGE:vN or a judge name) or by judge and "
        "judge_number (a name and a version number; beside a UUID, the fallback when the UUID "
        "is not known here, as run files write it)."
    )
    trials_per_case = StrictIntegerField(
        min_value=1,
        max_value=MAX_TRIALS_PER_CASE,
        required=False,
        default=DEFAULT_TRIALS_PER_CASE,
        help_text=f"N, attempts per case (1..{MAX_TRIALS_PER_CASE}; default "
        f"{DEFAULT_TRIALS_PER_CASE}, as on the form and the command line).",
    )
    source_version = StrictCharField(
        required=False, default="", allow_blank=True, help_text="Version label of the system."
    )
    against = StrictUUIDField(
        required=False,
        default=None,
        allow_null=True,
        help_text="An adaptive run: UUID of a succeeded run of the suite (the baseline). After "
        "N trials per case, more trials go only to cases whose comparison with it is still "
        "uncertain, until the gate's answer cannot change or 4N is reached.",
    )


class RunStartApi(APIView):
    """POST: start a run (``evals.runner.start.run_start``); 201 with the run, 400 naming the
    field on bad input; 413 for a body over 256 KiB (``core.bounds.BODY_MAX_BYTES``)."""

    permission_classes = [IsRunner]
    body_limit = "run_start"

    @extend_schema(request=RunStartInput, responses={201: RunStartedSerializer})
    def post(self, request):
        data = RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        # An unknown suite or baseline is a 404 naming the field (core.api.errors).
        suite = _named(Suite.objects.all(), v["suite"], field="suite")
        against = _named(Run.objects.all(), v["against"], field="against", noun="run")
        # A refused run is a DomainError: a 400 naming its field (core.api.errors).
        run = services.run_start(
            suite=suite,
            name=v["name"],
            target=v["target"],
            graders=v["graders"],
            trials_per_case=v["trials_per_case"],
            source_version=v["source_version"],
            started_by=request.user,
            against=against,
        )
        return _started(run, 201)


def _named(rows: QuerySet, value, *, field: str, noun: str = ""):
    """The row of ``rows`` with UUID ``value`` (None for None); else ``DomainError`` not_found."""
    if value is None:
        return None
    row = rows.filter(uuid=value).first()
    if row is None:
        raise DomainError(f"no {noun or field} with id {value}", field=field, code="not_found")
    return row


class RunRetryApi(APIView):
    """POST: retry the run's errored trials (``evals.runner.retry.run_retry``); 202 with the
    run (poll it), and a ``warning`` when the broker is unreachable; the errored attempts stay
    as history. 400 when none is left to retry."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=None,
        responses={202: RunStartedSerializer},
        parameters=[
            OpenApiParameter(
                "run_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the run."
            )
        ],
    )
    def post(self, request, run_id):
        run = get_object_or_404(
            Run.objects.select_related("suite"), uuid=uuid_or_404(run_id, "run")
        )
        run_retry(run=run, by=request.user)
        run.refresh_from_db()
        return _started(run, 202)


class RunCancelApi(APIView):
    """POST: cancel a queued or running run (``evals.runner.finalize.run_cancel``): workers
    start no further call; calls in flight finish and are recorded. Engineers and leads. 200
    with the run (cancelling a cancelled one again is a 200 that changes nothing); 409 when
    it has already succeeded or failed; 404 for an unknown run."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=None,
        responses={
            200: RunSerializer,
            404: OpenApiResponse(description="No such run."),
            409: OpenApiResponse(description="It has already succeeded or failed."),
        },
        parameters=[
            OpenApiParameter(
                "run_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the run."
            )
        ],
    )
    def post(self, request, run_id):
        run = get_object_or_404(
            Run.objects.select_related("suite"), uuid=uuid_or_404(run_id, "run")
        )
        run_cancel(run=run, by=request.user, via=Via.API, refuse_finished=True)
        return Response(RunSerializer(run).data, status=200)
