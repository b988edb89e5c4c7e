"""API of judges: judge versions with their trust state, judge runs, grading a run. Engineers
and leads; reviewers get 403 (they label blind), outsiders 403, no token 401.
"""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from core.actors import Via
from core.api.fields import (
    NoUnknownFields,
    StrictIntegerField,
    StrictUUIDField,
    query_uuid_known,
)
from core.api.figures import KappaSerializer, RateSerializer
from core.api.parsers import StrictJSONParser
from core.api.permissions import IsRunner
from core.bounds import SEED_MAX
from core.http import uuid_or_404
from evals.grading.grader_set import RECORDED_JUDGE_KIND, recorded_kind_reason
from evals.models import Run
from judges import runs
from judges.models import Judge, JudgeApproval, JudgeRun, JudgeVersion
from judges.selectors import pairwise_tally_get

PAIRWISE_TALLY = {
    "head_wins": "Pairs where both orders preferred the head run's response (count).",
    "base_wins": "Pairs where both orders preferred the base run's response (count).",
    "ties": "Pairs whose two orders disagree: position-inconsistent, never a vote (count).",
    "errors": "Pairs with an order that errored: no verdict (count).",
}
TRUSTED_VALUES = {"true": True, "false": False}


class ApprovalSerializer(serializers.Serializer):
    """A lead's active approval and the figures it was granted on (``JudgeApproval``)."""

    uuid = serializers.UUIDField(help_text="UUID of the approval.")
    approved_by = serializers.CharField(help_text="Username of the lead who approved.")
    approved_at = serializers.DateTimeField(help_text="When (ISO 8601 with offset).")
    calibration_set = serializers.UUIDField(
        allow_null=True,
        help_text="UUID of the calibration set approved on (null: every labeled trial).",
    )
    n = serializers.IntegerField(help_text="Trials compared (count).")
    agreement = serializers.FloatField(
        allow_null=True, help_text="Raw agreement (fraction 0..1); null when n = 0."
    )
    kappa = KappaSerializer(help_text="Cohen's kappa with its 95% interval.")
    far = RateSerializer(
        help_text="False-accept rate P(judge pass | human fail), Wilson 95% interval."
    )
    frr = RateSerializer(
        help_text="False-reject rate P(judge fail | human pass), Wilson 95% interval."
    )


def approval_json(approval: JudgeApproval | None) -> dict | None:
    """The ApprovalSerializer data of ``approval`` (None: untrusted)."""
    if approval is None:
        return None
    figures = approval.figures or {}
    return ApprovalSerializer(
        {
            "uuid": approval.uuid,
            "approved_by": approval.approved_by.get_username(),
            "approved_at": approval.approved_at,
            "calibration_set": approval.calibration_set.uuid
            if approval.calibration_set is not None
            else None,
            "n": figures.get("n"),
            "agreement": figures.get("agreement"),
            "kappa": figures.get("kappa"),
            "far": figures.get("far"),
            "frr": figures.get("frr"),
        }
    ).data


VERSION_FIELDS = [
    "uuid",
    "judge",
    "kind",
    "number",
    "model",
    "protocol",
    "base_url",
    "params",
    "threshold",
    "content_hash",
    "trusted",
    "trusted_at",
    "approval",
    "created_at",
]
VERSION_HELP = {
    "uuid": "Stable identifier (UUID); used in URLs.",
    "number": "Version number (1, 2, ...).",
    "model": "Model name.",
    "protocol": "Prompt protocol of a version recorded elsewhere (empty: run by Assay).",
    "base_url": "The endpoint: OpenAI-compatible, Anthropic's Messages API when params name "
    'provider "anthropic", or an Azure OpenAI resource with provider "azure" (empty: recorded '
    "elsewhere).",
    "params": 'Call parameters (JSON object: temperature, max_attempts, provider "openai", '
    '"anthropic" (then max_tokens is required) or "azure" (then deployment and api_version are '
    "required), ...).",
    "threshold": "Score threshold 0..1 for a pass (null: the verdict decides).",
    "content_hash": "SHA-256 hex over model, prompt, parameters and schema; any change is a "
    "new version.",
    "created_at": "When the version was created (ISO 8601 with offset).",
    "prompt_template": "The prompt template: $name placeholders ($output, $input, ...), $$ a "
    "literal $.",
    "output_schema": "JSON schema of the judge's reply (object).",
}


class JudgeVersionSerializer(serializers.ModelSerializer):
    judge = serializers.CharField(
        source="judge.name", read_only=True, help_text="Name of the judge."
    )
    kind = serializers.CharField(
        source="judge.kind",
        read_only=True,
        help_text="rubric, pairwise, faithfulness, "
        "faithfulness_claims, context_relevance or recorded.",
    )
    trusted = serializers.BooleanField(
        source="is_trusted",
        read_only=True,
        help_text="True while a lead's approval is active: only then may its verdicts gate.",
    )
    trusted_at = serializers.SerializerMethodField(
        help_text="When a lead approved it (ISO 8601 with offset; null: not trusted)."
    )
    approval = serializers.SerializerMethodField(
        help_text="The active approval with its figures (null: not trusted)."
    )

    class Meta:
        model = JudgeVersion
        fields = VERSION_FIELDS
        extra_kwargs = {f: {"help_text": VERSION_HELP[f]} for f in fields if f in VERSION_HELP}

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_trusted_at(self, version) -> str | None:
        active = getattr(version, "active_approvals", None)
        return (
            serializers.DateTimeField().to_representation(active[0].approved_at) if active else None
        )

    @extend_schema_field(ApprovalSerializer(allow_null=True))
    def get_approval(self, version) -> dict | None:
        active = getattr(version, "active_approvals", None)
        return approval_json(active[0] if active else None)


class JudgeVersionDetailSerializer(JudgeVersionSerializer):
    class Meta(JudgeVersionSerializer.Meta):
        fields = [*VERSION_FIELDS, "prompt_template", "output_schema"]
        extra_kwargs = {f: {"help_text": VERSION_HELP[f]} for f in fields if f in VERSION_HELP}


def _trusted_param(request) -> bool | None:
    raw = request.query_params.get("trusted")
    if raw is None:
        return None
    if raw not in TRUSTED_VALUES:
        raise serializers.ValidationError(
            {"trusted": [f"expected 'true' or 'false', got {raw[:100]!r}"]}
        )
    return TRUSTED_VALUES[raw]


def _path_uuid(what: str) -> OpenApiParameter:
    return OpenApiParameter(
        "uuid", OpenApiTypes.UUID, OpenApiParameter.PATH, description=f"UUID of the {what}."
    )


VERSION_FILTERS = [
    OpenApiParameter("judge", str, description="Only versions of the judge with this name."),
    OpenApiParameter(
        "trusted",
        str,
        enum=["true", "false"],
        description="true: trusted versions only; false: untrusted only; any other value: 400.",
    ),
]


@extend_schema_view(
    list=extend_schema(parameters=VERSION_FILTERS),
    retrieve=extend_schema(parameters=[_path_uuid("judge version")]),
)
class JudgeVersionViewSet(viewsets.ReadOnlyModelViewSet):
    """Judge versions with their trust state (engineers and leads). The list leaves out the
    prompt template and output schema; the detail (by UUID) holds them."""

    permission_classes = [IsRunner]
    lookup_field = "uuid"

    def get_queryset(self):
        active = JudgeApproval.objects.active().select_related("approved_by", "calibration_set")
        qs = (
            JudgeVersion.objects.with_trust()
            .select_related("judge")
            .prefetch_related(Prefetch("approvals", queryset=active, to_attr="active_approvals"))
        )
        if self.action == "list":
            judge = self.request.query_params.get("judge")
            if judge is not None:
                qs = qs.filter(judge__name=judge)
            trusted = _trusted_param(self.request)
            if trusted is not None:
                qs = qs.trusted() if trusted else qs.untrusted()
        return qs

    def get_serializer_class(self):
        if self.action == "retrieve":
            return JudgeVersionDetailSerializer
        return JudgeVersionSerializer


# --- judge runs --------------------------------------------------------------------------------

RUN_HELP = {
    "uuid": "Stable identifier (UUID); poll /api/judge-runs/<uuid>/.",
    "grader": "Grader key its grades carry (judge:<name>:v<number>).",
    "status": "queued, running, succeeded, failed (every grade errored: no verdict at all) "
    "or cancelled.",
    "trials_total": "Trials to grade (count).",
    "trials_graded": "Trials with a grade so far, errored ones included (count).",
    "trials_errored": "Errored grades: no verdict, never counted as a fail (count).",
    "error_message": "How many grades errored and why, most frequent reasons first (empty: none).",
    "created_at": "When it was (last) started (ISO 8601 with offset).",
    "finished_at": "When it ended (ISO 8601 with offset; null: not yet).",
    "unpaired": "Pairwise judge runs: ok trials of either run with no ok counterpart (same "
    "case and attempt) in the other, not judged (count; 0 for a pointwise judge run).",
}


class JudgeRunSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(
        source="run.uuid",
        read_only=True,
        help_text="UUID of the graded run (pairwise: the head run, response B).",
    )
    base_run = serializers.UUIDField(
        source="base_run.uuid",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="Pairwise judge runs: UUID of the base run (response A); null for a "
        "pointwise judge run. Then the trials_* counts count pairs: graded = judged in both "
        "presentation orders, errored = an order without a verdict.",
    )
    pairwise = serializers.SerializerMethodField(
        help_text="Pairwise judge runs: {head_wins, base_wins, ties, errors} over the pairs "
        "judged in both orders so far (a tie: the two orders disagree); null otherwise."
    )
    judge_version = serializers.UUIDField(
        source="judge_version.uuid", read_only=True, help_text="UUID of the judge version."
    )
    progress = serializers.SerializerMethodField(
        help_text="trials_graded / trials_total (fraction 0..1); null when there is no "
        "trial to grade."
    )
    started_by = serializers.SerializerMethodField(
        help_text="Username of who started it (null: unknown)."
    )
    cancelled_by = serializers.SerializerMethodField(
        help_text="Username of who cancelled it (null: not cancelled, or cancelled with no "
        "user: from the command line, by the system; see cancelled_via)."
    )
    cancelled_via = serializers.CharField(
        read_only=True,
        help_text="Where the cancel came from: page, api, command or system; empty while not "
        "cancelled (and for a judge run cancelled before it was recorded).",
    )
    cancelled = serializers.CharField(
        source="cancelled_text",
        read_only=True,
        help_text='Who cancelled it, as the page says it ("by carol", "from the command '
        'line", "by the system"); empty while not cancelled.',
    )

    class Meta:
        model = JudgeRun
        fields = [
            "uuid",
            "run",
            "base_run",
            "judge_version",
            "grader",
            "status",
            "trials_total",
            "trials_graded",
            "trials_errored",
            "unpaired",
            "pairwise",
            "error_message",
            "progress",
            "started_by",
            "cancelled_by",
            "cancelled_via",
            "cancelled",
            "created_at",
            "finished_at",
        ]
        extra_kwargs = {f: {"help_text": RUN_HELP[f]} for f in fields if f in RUN_HELP}

    def get_progress(self, judge_run) -> float | None:
        if not judge_run.trials_total:
            return None
        return judge_run.trials_graded / judge_run.trials_total

    def get_started_by(self, judge_run) -> str | None:
        return judge_run.started_by.get_username() if judge_run.started_by_id else None

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {
                k: {"type": "integer", "description": text} for k, text in PAIRWISE_TALLY.items()
            },
        }
    )
    def get_pairwise(self, judge_run) -> dict | None:
        if not judge_run.is_pairwise:
            return None
        tally = pairwise_tally_get(judge_run=judge_run)
        return {k: getattr(tally, k) for k in PAIRWISE_TALLY}

    def get_cancelled_by(self, judge_run) -> str | None:
        return judge_run.cancelled_by.get_username() if judge_run.cancelled_by_id else None


RUN_FILTERS = [
    OpenApiParameter(
        name,
        OpenApiTypes.UUID,
        description=f"Only judge runs of this {name.replace('_', ' ')} (UUID); not a UUID: 400.",
    )
    for name in ("run", "judge_version")
]


@extend_schema_view(
    list=extend_schema(parameters=RUN_FILTERS),
    retrieve=extend_schema(parameters=[_path_uuid("judge run")]),
)
class JudgeRunViewSet(viewsets.ReadOnlyModelViewSet):
    """Judge runs and their progress, counted from the grade rows (engineers and leads)."""

    permission_classes = [IsRunner]
    lookup_field = "uuid"
    serializer_class = JudgeRunSerializer

    def get_queryset(self):
        qs = JudgeRun.objects.select_related(
            "run", "base_run", "judge_version", "started_by", "cancelled_by"
        )
        for param, lookup, rows, noun in (
            ("run", "run__uuid", Run.objects.all(), "run"),
            ("judge_version", "judge_version__uuid", JudgeVersion.objects.all(), "judge version"),
        ):
            value = query_uuid_known(self.request, param, rows, noun)
            if value is not None:
                qs = qs.filter(**{lookup: value})
        return qs


class JudgeRunStartInput(NoUnknownFields, serializers.Serializer):
    run = StrictUUIDField(
        required=False, help_text="UUID of a finished run to grade (pointwise judge versions)."
    )
    base_run = StrictUUIDField(
        required=False,
        help_text="Pairwise judge versions, with head_run: UUID of the finished base run "
        "(response A).",
    )
    head_run = StrictUUIDField(
        required=False,
        help_text="Pairwise judge versions, with base_run: UUID of the finished head run of "
        "the same suite (response B), compared case by case and attempt by attempt.",
    )
    judge_version = StrictUUIDField(
        help_text="UUID of the judge version: pointwise with run; pairwise with base_run and "
        "head_run (not recorded elsewhere)."
    )

    def validate(self, attrs):
        pairwise = "base_run" in attrs or "head_run" in attrs
        if pairwise and ("base_run" not in attrs or "head_run" not in attrs):
            missing = "head_run" if "base_run" in attrs else "base_run"
            raise serializers.ValidationError({missing: ["required with the other run"]})
        if pairwise and "run" in attrs:
            raise serializers.ValidationError(
                {"run": ["give run (pointwise) or base_run and head_run (pairwise), not both"]}
            )
        if not pairwise and "run" not in attrs:
            raise serializers.ValidationError({"run": ["This field is required."]})
        if pairwise and (attrs.get("sample") is not None or attrs.get("seed") is not None):
            raise serializers.ValidationError({"sample": ["not with a pairwise judge run"]})
        return attrs

    sample = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        help_text="Grade a random sample of this many ok trials "
        "(count; omitted or null: every ok trial).",
    )
    seed = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=SEED_MAX,
        help_text="Seed of the sample (whole number from 0 to 2**63 - 1): the same seed picks "
        "the same trials.",
    )


class JudgeRunStartApi(APIView):
    """POST (JSON): grade a run's ok trials with a judge version in Celery tasks
    (``judges.runs.judge_run_start``), or, with ``base_run`` and ``head_run``, compare two
    runs with a pairwise judge version (``judges.runs.pairwise_judge_run_start``);
    engineers and leads. 202 with the judge run (poll ``Location``); 400 naming the field;
    404 for an unknown run or judge version."""

    permission_classes = [IsRunner]
    parser_classes = [StrictJSONParser]

    @extend_schema(
        request=JudgeRunStartInput,
        responses={
            202: JudgeRunSerializer,
            400: OpenApiResponse(description="A field is bad; the body names it."),
            404: OpenApiResponse(description="No such run or judge version."),
        },
    )
    def post(self, request):
        data = JudgeRunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        version = get_object_or_404(
            JudgeVersion.objects.select_related("judge"), uuid=v["judge_version"]
        )
        if "head_run" in v:
            judge_run = runs.pairwise_judge_run_start(
                base=get_object_or_404(Run, uuid=v["base_run"]),
                head=get_object_or_404(Run, uuid=v["head_run"]),
                judge_version=version,
                by=request.user,
            )
            location = reverse("api:judge-run-detail", kwargs={"uuid": judge_run.uuid})
            return Response(
                JudgeRunSerializer(judge_run).data, status=202, headers={"Location": location}
            )
        run = get_object_or_404(Run, uuid=v["run"])
        # The UI's form offers finished runs only (judges.forms.JudgeRunForm).
        if run.status in (Run.Status.QUEUED, Run.Status.RUNNING):
            raise serializers.ValidationError(
                {"run": [f"run {run.name!r} is {run.status}; grade it once it has finished"]}
            )
        if version.judge.kind == Judge.Kind.RECORDED:
            raise serializers.ValidationError(
                {"judge_version": [f"{version} is {recorded_kind_reason(RECORDED_JUDGE_KIND)}"]}
            )
        if version.judge.kind == Judge.Kind.PAIRWISE:
            raise serializers.ValidationError(
                {
                    "judge_version": [
                        "a pairwise judge does not grade single trials: give base_run and "
                        "head_run to compare two runs"
                    ]
                }
            )
        judge_run = runs.judge_run_start(
            run=run, judge_version=version, sample=v["sample"], by=request.user, seed=v["seed"]
        )
        location = reverse("api:judge-run-detail", kwargs={"uuid": judge_run.uuid})
        return Response(
            JudgeRunSerializer(judge_run).data, status=202, headers={"Location": location}
        )


class JudgeRunCancelApi(APIView):
    """POST: cancel a queued or running judge run (``judges.runs.judge_run_cancel``):
    workers make no further judge call. Engineers and leads. 200 with the judge run
    (cancelling a cancelled one again is a 200 that changes nothing); 409 when it has
    already succeeded or failed; 404 for an unknown judge run."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=None,
        responses={
            200: JudgeRunSerializer,
            404: OpenApiResponse(description="No such judge run."),
            409: OpenApiResponse(description="It has already succeeded or failed."),
        },
        parameters=[
            OpenApiParameter(
                "judge_run_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description="UUID of the judge run.",
            )
        ],
    )
    def post(self, request, judge_run_id):
        judge_run = get_object_or_404(
            JudgeRun.objects.select_related("run", "judge_version"),
            uuid=uuid_or_404(judge_run_id, "judge run"),
        )
        runs.judge_run_cancel(
            judge_run=judge_run, by=request.user, via=Via.API, refuse_finished=True
        )
        return Response(JudgeRunSerializer(judge_run).data, status=200)
