"""Read-only API resources of evals (suites, cases, runs, trials, grades, baselines) and
the actions start a run, set a baseline and gate. Thin: parse, call one service, render."""

from __future__ import annotations

from django.conf import settings
from django.db.models.functions import Length, Substr
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors, services
from .api_base import IsRunner, IsViewer, SetAtCursorPagination
from .models import Baseline, Case, Grade, Run, Suite, Trial

H = {  # help text of every exposed field, with units
    "uuid": "Stable identifier (UUID); used in URLs.",
    "created_at": "When the row was created (ISO 8601, UTC).",
    "suite": "UUID of the suite.", "run": "UUID of the run.", "trial": "UUID of the trial.",
    "case": "UUID of the case.",
}


def _help(fields, **extra) -> dict:
    texts = {**H, **extra}
    return {f: {"help_text": texts[f]} for f in fields if f in texts}


class SuiteSerializer(serializers.ModelSerializer):
    class Meta:
        model = Suite
        fields = ["uuid", "name", "description", "kind", "created_at"]
        extra_kwargs = _help(fields, name="Unique suite name.", description="Free text.",
                             kind="capability or regression.")


class CaseSerializer(serializers.ModelSerializer):
    suite = serializers.SlugRelatedField(slug_field="uuid", read_only=True, help_text=H["suite"])

    class Meta:
        model = Case
        fields = ["uuid", "suite", "key", "input", "expected", "context", "tags",
                  "content_hash", "created_at", "retired_at"]
        extra_kwargs = _help(
            fields, key="Case key, unique among the suite's active cases.",
            input="String or JSON object given to the target.",
            expected="Expected answer (any JSON) or null.",
            context="List of {id, text} context documents.", tags="List of tag strings.",
            content_hash="SHA-256 hex of the canonical content.",
            retired_at="When the case was retired (null: active).")


RUN_FIELDS = ["uuid", "suite", "name", "source", "status", "target_kind", "model",
              "trials_per_case", "trials_total", "trials_finished", "trials_errored",
              "source_version", "error_message", "created_at", "started_at", "finished_at"]
RUN_HELP = _help(
    RUN_FIELDS, name="Run name, unique in its suite.", source="executed or imported.",
    status="queued, running, succeeded, failed or cancelled.",
    target_kind="Kind of target (simulated, openai, callable, ...).", model="Model name.",
    trials_per_case="N, attempts per case.", trials_total="Trials in the run (count).",
    trials_finished="Trials finished (count).", trials_errored="Trials errored (count).",
    source_version="Version label of the system under test.",
    error_message="Why the run failed (empty otherwise).",
    started_at="Start time (ISO 8601, UTC).", finished_at="End time (ISO 8601, UTC).")


class RunSerializer(serializers.ModelSerializer):
    suite = serializers.SlugRelatedField(slug_field="uuid", read_only=True, help_text=H["suite"])

    class Meta:
        model = Run
        fields = RUN_FIELDS
        extra_kwargs = RUN_HELP


class RunDetailSerializer(RunSerializer):
    report = serializers.SerializerMethodField(
        help_text="The run report (evals.selectors.run_report): counts, pass rate with its "
                  "95% interval (fractions 0..1), pass@k, tokens, latency (ms), cost (USD).")

    class Meta(RunSerializer.Meta):
        fields = [*RUN_FIELDS, "target", "graders", "report"]
        extra_kwargs = {**RUN_HELP, "target": {"help_text": "Target configuration snapshot."},
                        "graders": {"help_text": "Grader set: list of {key, kind, config, "
                                                 "gating}."}}

    def get_report(self, run) -> dict:
        return selectors.run_report(run=run).to_dict()


TRIAL_FIELDS = ["uuid", "run", "case", "attempt", "status", "error_message", "latency_ms",
                "input_tokens", "output_tokens", "cost_usd", "created_at"]
TRIAL_HELP = _help(
    TRIAL_FIELDS, attempt="Attempt number 1..N.", status="queued, running, ok, error or "
    "cancelled.", error_message="Why the trial errored.",
    latency_ms="Wall-clock latency of the target call (ms).",
    input_tokens="Prompt tokens (null: unknown).", output_tokens="Completion tokens "
    "(null: unknown).", cost_usd="Cost in USD (string, exact; null: price unknown).")


class TrialSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(source="run.uuid", read_only=True, help_text=H["run"])
    case = serializers.UUIDField(source="case.uuid", read_only=True, help_text=H["case"])
    output_preview = serializers.CharField(
        read_only=True, help_text="First 2,000 characters of the output.")
    output_length = serializers.IntegerField(
        read_only=True, help_text="Length of the whole output (characters).")

    class Meta:
        model = Trial
        fields = [*TRIAL_FIELDS, "output_preview", "output_length"]
        extra_kwargs = TRIAL_HELP


class TrialDetailSerializer(TrialSerializer):
    class Meta(TrialSerializer.Meta):
        fields = [*TRIAL_FIELDS, "output", "output_length"]
        extra_kwargs = {**TRIAL_HELP, "output": {"help_text": "The whole output (text)."}}


class GradeSerializer(serializers.ModelSerializer):
    trial = serializers.UUIDField(source="trial.uuid", read_only=True, help_text=H["trial"])
    judge_version = serializers.UUIDField(source="judge_version.uuid", read_only=True,
                                          allow_null=True, help_text="UUID of the judge "
                                          "version (null: deterministic grader).")

    class Meta:
        model = Grade
        fields = ["id", "trial", "grader", "grader_version", "judge_version", "status",
                  "passed", "score", "reason", "gating", "created_at"]
        extra_kwargs = _help(
            fields, id="Grade id (grades have no UUID).", grader="Grader key.",
            grader_version="Grader version label.", status="ok or error.",
            passed="Verdict (null: errored, not counted).", score="Score 0..1 (null: none).",
            reason="Why.", gating="Counts toward the pass rate and the gate.")


class BaselineSerializer(serializers.ModelSerializer):
    suite = serializers.UUIDField(source="suite.uuid", read_only=True, help_text=H["suite"])
    run = serializers.UUIDField(source="run.uuid", read_only=True, help_text=H["run"])

    class Meta:
        model = Baseline
        fields = ["id", "suite", "run", "set_at", "note"]
        extra_kwargs = _help(fields, id="Baseline row id.", set_at="When it was set (UTC).",
                             note="Why (at most 500 characters).")


def _filtered(request, qs, **params):
    """``qs`` filtered by the query parameters named in ``params`` (param -> lookup)."""
    for param, lookup in params.items():
        value = request.query_params.get(param)
        if value:
            qs = qs.filter(**{lookup: value})
    return qs


class ViewerViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsViewer]
    lookup_field = "uuid"


class SuiteViewSet(ViewerViewSet):
    """Suites."""

    queryset = Suite.objects.all()
    serializer_class = SuiteSerializer


class CaseViewSet(ViewerViewSet):
    """Cases; ``?suite=<uuid>``, ``?tag=<tag>``."""

    serializer_class = CaseSerializer

    def get_queryset(self):
        qs = _filtered(self.request, Case.objects.select_related("suite"), suite="suite__uuid")
        tag = self.request.query_params.get("tag")
        if tag:
            ids = [pk for pk, tags in qs.values_list("id", "tags") if tag in (tags or [])]
            qs = qs.filter(id__in=ids)
        return qs


class RunViewSet(ViewerViewSet):
    """Runs; ``?suite=<uuid>``, ``?status=``. The detail holds the run report."""

    def get_queryset(self):
        return _filtered(self.request, Run.objects.select_related("suite"),
                         suite="suite__uuid", status="status")

    def get_serializer_class(self):
        return RunDetailSerializer if self.action == "retrieve" else RunSerializer


class TrialViewSet(ViewerViewSet):
    """Trials; ``?run=<uuid>``, ``?status=``. Lists hold an output preview (first 2,000
    characters, cut in the database) and the full length; the detail holds the output."""

    def get_queryset(self):
        qs = Trial.objects.select_related("run", "case")
        if self.action == "list":
            qs = qs.defer("output", "raw_response").annotate(
                output_preview=Substr("output", 1, settings.ASSAY["OUTPUT_PREVIEW_CHARS"]),
                output_length=Length("output"))
        else:
            qs = qs.annotate(output_length=Length("output"))
        return _filtered(self.request, qs, run="run__uuid", status="status")

    def get_serializer_class(self):
        return TrialDetailSerializer if self.action == "retrieve" else TrialSerializer


class GradeViewSet(ViewerViewSet):
    """Grades; ``?run=<uuid>``, ``?status=``. Looked up by id."""

    lookup_field = "pk"
    serializer_class = GradeSerializer

    def get_queryset(self):
        qs = Grade.objects.select_related("trial", "judge_version")
        return _filtered(self.request, qs, run="trial__run__uuid", status="status")


class BaselineViewSet(ViewerViewSet):
    """Baselines (history, oldest first); ``?suite=<uuid>``. Looked up by id."""

    lookup_field = "pk"
    serializer_class = BaselineSerializer
    pagination_class = SetAtCursorPagination

    def get_queryset(self):
        qs = Baseline.objects.select_related("suite", "run")
        return _filtered(self.request, qs, suite="suite__uuid")


class RunStartInput(serializers.Serializer):
    suite = serializers.UUIDField(help_text=H["suite"])
    name = serializers.CharField(max_length=200, help_text="Run name, unique in its suite.")
    target = serializers.JSONField(help_text="Target configuration ({kind, ...}).")
    graders = serializers.JSONField(help_text="Grader set: list of {key, kind, config}.")
    trials_per_case = serializers.IntegerField(min_value=1, max_value=50,
                                               help_text="N, attempts per case (1..50).")
    source_version = serializers.CharField(required=False, default="", allow_blank=True,
                                           help_text="Version label of the system.")


class RunStartApi(APIView):
    """POST: start a run (``evals.services.run_start``); 201 with the run, 400 naming the
    field on bad input."""

    permission_classes = [IsRunner]

    @extend_schema(request=RunStartInput, responses={201: RunSerializer})
    def post(self, request):
        data = RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        suite = get_object_or_404(Suite, uuid=v["suite"])
        try:
            run = services.run_start(
                suite=suite, name=v["name"], target=v["target"], graders=v["graders"],
                trials_per_case=v["trials_per_case"], source_version=v["source_version"],
                started_by=request.user)
        except ValueError as exc:
            raise serializers.ValidationError({"detail": str(exc)}) from exc
        return Response(RunSerializer(run).data, status=201)


class BaselineSetInput(serializers.Serializer):
    run = serializers.UUIDField(help_text="UUID of the finished run to make the baseline.")
    note = serializers.CharField(max_length=500, required=False, default="", allow_blank=True,
                                 help_text="Why (at most 500 characters).")


class BaselineSetApi(APIView):
    """POST: make a finished run its suite's baseline (``baseline_set``); 201."""

    permission_classes = [IsRunner]

    @extend_schema(request=BaselineSetInput, responses={201: BaselineSerializer})
    def post(self, request):
        data = BaselineSetInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = get_object_or_404(Run.objects.select_related("suite"),
                                uuid=data.validated_data["run"])
        try:
            baseline = services.baseline_set(suite=run.suite, run=run, by=request.user,
                                             note=data.validated_data["note"])
        except ValueError as exc:
            raise serializers.ValidationError({"detail": str(exc)}) from exc
        return Response(BaselineSerializer(baseline).data, status=201)
