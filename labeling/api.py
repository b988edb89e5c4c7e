"""API of labeling: calibration sets (with their figures), the calibration export, labels
and submitting a label. Thin: parse, call one service or selector, render.

Who sees what mirrors the UI (``labeling.views``, ``judges.views``):
- calibration sets, list and detail: every role; the calibration figures (judge verdicts
  against human labels) only for engineers and leads, as on the calibration page. A reviewer
  gets ``calibration: null`` with the reason: reviewers label blind;
- the calibration export (judge verdicts and every label): engineers and leads;
- labels: leads and engineers see every label; a reviewer sees only their own (the queue
  never shows another reviewer's label); outsiders nothing;
- submitting a label: reviewers and leads (``label_submit`` checks the same roles).
"""

from __future__ import annotations

import uuid

from django.shortcuts import get_object_or_404
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

from core.api.fields import (
    NoUnknownFields,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictUUIDField,
    query_uuid,
    query_uuid_known,
)
from core.api.figures import ConfusionSerializer, KappaSerializer, RateSerializer
from core.api.parsers import StrictJSONParser
from core.api.permissions import IsLabeler, IsViewer
from core.roles import ENGINEER, LEAD, user_has_role
from evals.models import Run, Suite, Trial
from judges.models import JudgeVersion
from labeling import services
from labeling.freeze import FROZEN_TEXT, revisions_after_reveal
from labeling.models import CalibrationSet, Label
from labeling.selectors import calibration_compute, label_version_get, labels_visible

WITHHELD = (
    "withheld: reviewers label blind, so the judge's figures are shown to engineers and leads only"
)
NO_JUDGE = "the set has no judge version: give ?judge_version=<uuid>"
NO_AGREEMENT = "n = 0: no item has both a reference label and an ok judge verdict"


# --- calibration sets -------------------------------------------------------------------------


class ThresholdsSerializer(serializers.Serializer):
    min_n = serializers.IntegerField(help_text="Trust needs n >= min_n (trials).")
    min_kappa = serializers.FloatField(
        help_text="Trust needs the lower 95% bound of kappa >= min_kappa."
    )
    max_far = serializers.FloatField(
        help_text="Trust needs the upper 95% bound of the false-accept rate (fraction) <= max_far."
    )
    min_human_fails = serializers.IntegerField(
        allow_null=True,
        help_text="Trust needs at least this many human fails: the fewest for which the "
        "false-accept bound can be under max_far (35 at 10%).",
    )
    min_position_consistency = serializers.FloatField(
        help_text="Pairwise judges: trust needs the lower 95% bound of position consistency "
        "(fraction) >= min_position_consistency."
    )
    confidence = serializers.FloatField(help_text="Confidence of the bounds (0.95).")


class TrustCheckSerializer(serializers.Serializer):
    key = serializers.CharField(
        help_text="n, human_fails, far_upper, far_weighted_upper or kappa_lower."
    )
    label = serializers.CharField(help_text="What the value is.")
    value = serializers.FloatField(allow_null=True, help_text="The figure; null: undefined.")
    op = serializers.CharField(help_text="'<=' or '>=': how value must compare to threshold.")
    threshold = serializers.FloatField(help_text="The threshold.")
    ok = serializers.BooleanField(help_text="Whether this condition holds.")


class WeightedRateSerializer(serializers.Serializer):
    rate = serializers.FloatField(allow_null=True, help_text="Weighted share (fraction).")
    n = serializers.IntegerField(help_text="Human-fail items behind it (count).")
    n_eff = serializers.FloatField(allow_null=True, help_text="Kish effective sample size.")
    ci_low = serializers.FloatField(allow_null=True, help_text="Wilson 95% at n_eff, low.")
    ci_high = serializers.FloatField(allow_null=True, help_text="Wilson 95% at n_eff, high.")
    reason = serializers.CharField(help_text="Why rate is null (empty when defined).")


class CalibrationFiguresSerializer(serializers.Serializer):
    """``labeling.selectors.calibration_compute`` on the set's trials (strict JSON)."""

    judge_version = serializers.UUIDField(help_text="UUID of the judge version compared.")
    judge_version_label = serializers.CharField(help_text="The judge version as 'name vN'.")
    n = serializers.IntegerField(
        help_text="Trials with a reference label and an ok judge "
        "verdict: the only ones in the figures (count)."
    )
    n_judge_errors = serializers.IntegerField(
        help_text="Errored judge grades, left out of n (count)."
    )
    n_judge_missing = serializers.IntegerField(
        help_text="Labeled trials without a judge grade, left out of n (count)."
    )
    n_not_judged = serializers.IntegerField(
        help_text="Labeled trials the judge did not judge (a rung the grader ladder "
        "skipped), left out of n (count)."
    )
    n_unresolved = serializers.IntegerField(
        help_text="Trials where humans disagree and no lead adjudicated, left out (count)."
    )
    n_unlabeled = serializers.IntegerField(help_text="Trials with no label yet (count).")
    confusion = ConfusionSerializer(help_text="Judge verdict x human reference verdict (trials).")
    agreement = serializers.FloatField(
        allow_null=True,
        help_text="Agreeing / n (fraction 0..1); null when n = 0 (agreement_reason).",
    )
    agreement_numerator = serializers.IntegerField(help_text="Agreeing trials (count).")
    agreement_reason = serializers.CharField(
        help_text="Why agreement is null (empty when defined)."
    )
    kappa = KappaSerializer(help_text="Cohen's kappa with its 95% interval.")
    far = RateSerializer(
        help_text="False-accept rate P(judge pass | human fail), Wilson 95% interval."
    )
    frr = RateSerializer(
        help_text="False-reject rate P(judge fail | human pass), Wilson 95% interval."
    )
    thresholds = ThresholdsSerializer(help_text="The trust thresholds (settings or suite).")
    trust_ok = serializers.BooleanField(help_text="True only when every threshold holds.")
    trust_checks = TrustCheckSerializer(
        many=True, help_text="The trust rule, one condition each, on the 95% bounds."
    )
    far_weighted = WeightedRateSerializer(
        allow_null=True,
        help_text="Population estimate of the false-accept rate (weights 1 / inclusion "
        "probability); null when the set has no sampling weights (weights_note).",
    )
    weights_note = serializers.CharField(help_text="Why far_weighted is null.")
    trust_reasons = serializers.ListField(
        child=serializers.CharField(), help_text="Which thresholds do not hold."
    )
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="Warnings (small n, a missing human class)."
    )
    labels_revised_after_reveal = serializers.IntegerField(
        help_text="Labels (one per trial and reviewer) revised after their reviewer "
        "finished the set and could see the judge's verdicts (count). The figures use the "
        "label given blind; these revisions are counted here, apart."
    )
    labels_revised_after_reveal_text = serializers.CharField(
        help_text="The same count as the calibration page says it."
    )


SET_HELP = {
    "uuid": "Stable identifier (UUID); used in URLs.",
    "name": "Set name.",
    "size": "Items in the set (trials).",
    "seed": "Seed of the stratified pick (integer).",
    "frozen_at": "When labeling started and the set froze (ISO 8601 with offset; null: editable).",
    "created_at": "When the set was built (ISO 8601 with offset).",
}


class CalibrationSetSerializer(serializers.ModelSerializer):
    suite = serializers.UUIDField(
        source="suite.uuid", read_only=True, help_text="UUID of the suite."
    )
    suite_name = serializers.CharField(
        source="suite.name", read_only=True, help_text="Name of the suite."
    )
    run = serializers.UUIDField(
        source="run.uuid", read_only=True, help_text="UUID of the run the trials come from."
    )
    run_name = serializers.CharField(source="run.name", read_only=True, help_text="Run name.")
    judge_version = serializers.UUIDField(
        source="judge_version.uuid",
        read_only=True,
        allow_null=True,
        help_text="UUID of the judge version whose verdicts stratified the pick (null: tags only).",
    )
    judge_version_label = serializers.SerializerMethodField(
        help_text="That judge version as 'name vN' (null: none)."
    )
    frozen = serializers.BooleanField(
        source="is_frozen", read_only=True, help_text="True once labeling started (no more edits)."
    )
    created_by = serializers.SerializerMethodField(
        help_text="Username of who built it (null: unknown)."
    )

    class Meta:
        model = CalibrationSet
        fields = [
            "uuid",
            "name",
            "suite",
            "suite_name",
            "run",
            "run_name",
            "judge_version",
            "judge_version_label",
            "size",
            "seed",
            "frozen",
            "frozen_at",
            "created_by",
            "created_at",
        ]
        extra_kwargs = {f: {"help_text": SET_HELP[f]} for f in fields if f in SET_HELP}

    def get_judge_version_label(self, cset) -> str | None:
        return str(cset.judge_version) if cset.judge_version_id else None

    def get_created_by(self, cset) -> str | None:
        return cset.created_by.get_username() if cset.created_by_id else None


class CalibrationSetDetailSerializer(CalibrationSetSerializer):
    calibration = serializers.SerializerMethodField(
        help_text="The calibration figures (object; see CalibrationFigures), or null with "
        "calibration_reason: for reviewers (they label blind) and when no judge "
        "version is known."
    )
    calibration_reason = serializers.SerializerMethodField(
        help_text="Why calibration is null (empty when present)."
    )

    class Meta(CalibrationSetSerializer.Meta):
        fields = [*CalibrationSetSerializer.Meta.fields, "calibration", "calibration_reason"]

    @extend_schema_field(CalibrationFiguresSerializer(allow_null=True))
    def get_calibration(self, cset) -> dict | None:
        return self.context["figures"]

    def get_calibration_reason(self, cset) -> str:
        return self.context["figures_reason"]


def version_param(request) -> JudgeVersion | None:
    """The judge version named by ``?judge_version=<uuid>`` (404 when unknown), or None."""
    version_id = query_uuid(request, "judge_version")
    if version_id is None:
        return None
    return get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)


def set_figures(
    *, calibration_set: CalibrationSet, judge_version_id: uuid.UUID | None, user
) -> tuple[dict | None, str]:
    """``(figures, reason)``: the CalibrationFigures of the judge version ``judge_version_id``
    (default: the set's own) on the set, or None with the reason (a reviewer asked: nothing
    about judges is looked up; no judge version known). Unknown judge version: Http404."""
    if not user_has_role(user, ENGINEER, LEAD):
        return None, WITHHELD
    version = calibration_set.judge_version
    if judge_version_id is not None:
        version = get_object_or_404(
            JudgeVersion.objects.select_related("judge"), uuid=judge_version_id
        )
    if version is None:
        return None, NO_JUDGE
    cal = calibration_compute(judge_version=version, calibration_set=calibration_set)
    figures = {
        **cal.as_json(),
        "judge_version": version.uuid,
        "judge_version_label": str(version),
        "agreement_reason": "" if cal.agreement is not None else NO_AGREEMENT,
    }
    revised = revisions_after_reveal(
        trial_ids=calibration_set.items.values_list("trial_id", flat=True)
    )
    figures["labels_revised_after_reveal"] = revised.n
    figures["labels_revised_after_reveal_text"] = revised.text
    return CalibrationFiguresSerializer(figures).data, ""


SET_PATH = OpenApiParameter(
    "uuid", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the calibration set."
)
SUITE_PARAM = OpenApiParameter(
    "suite", OpenApiTypes.UUID, description="Only sets of this suite (UUID); not a UUID: 400."
)


@extend_schema_view(
    list=extend_schema(
        parameters=[
            SUITE_PARAM,
            OpenApiParameter(
                "judge_version",
                OpenApiTypes.UUID,
                description="Only sets stratified by this judge version (UUID); not a UUID: 400.",
            ),
        ]
    ),
    retrieve=extend_schema(
        parameters=[
            SET_PATH,
            OpenApiParameter(
                "judge_version",
                OpenApiTypes.UUID,
                description="The judge version whose figures to compute on the set (UUID; "
                "default: the set's own). Unknown: 404.",
            ),
        ],
        responses=CalibrationSetDetailSerializer,
    ),
)
class CalibrationSetViewSet(viewsets.ReadOnlyModelViewSet):
    """Calibration sets (every role); the detail holds the calibration figures for
    engineers and leads (null with the reason for reviewers, who label blind)."""

    permission_classes = [IsViewer]
    lookup_field = "uuid"
    serializer_class = CalibrationSetSerializer

    def get_queryset(self):
        qs = CalibrationSet.objects.select_related(
            "suite", "run", "judge_version__judge", "created_by"
        )
        if self.action == "list":
            suite = query_uuid_known(self.request, "suite", Suite.objects.all())
            if suite is not None:
                qs = qs.filter(suite__uuid=suite)
            version = query_uuid_known(
                self.request, "judge_version", JudgeVersion.objects.all(), "judge version"
            )
            if version is not None:
                qs = qs.filter(judge_version__uuid=version)
        return qs

    def retrieve(self, request, *args, **kwargs):
        cset = self.get_object()
        figures, reason = set_figures(
            calibration_set=cset,
            judge_version_id=query_uuid(request, "judge_version"),
            user=request.user,
        )
        context = {**self.get_serializer_context(), "figures": figures, "figures_reason": reason}
        return Response(CalibrationSetDetailSerializer(cset, context=context).data)


# --- labels -------------------------------------------------------------------------------------

LABEL_HELP = {
    "id": "Label id (labels have no UUID).",
    "source": "reviewer (saved in Assay) or import.",
    "verdict": "pass or fail.",
    "version": "Revision of the label: 1 for a first label, +1 per change; send it back as "
    "expected_version.",
    "created_at": "When the label was first saved (ISO 8601 with offset).",
    "updated_at": "When the current verdict was saved (ISO 8601 with offset).",
}
GUIDELINES_HELP = (
    "The version (1, 2, ...) of the calibration set's guidelines the current verdict was "
    "given under; null: no guidelines."
)
LABEL_FIELDS = [
    "id",
    "trial",
    "run",
    "case_id",
    "attempt",
    "reviewer",
    "source",
    "verdict",
    "version",
    "created_at",
    "updated_at",
]


class LabelSerializer(serializers.ModelSerializer):
    trial = serializers.UUIDField(
        source="trial.uuid", read_only=True, help_text="UUID of the trial."
    )
    run = serializers.UUIDField(
        source="trial.run.uuid", read_only=True, help_text="UUID of the trial's run."
    )
    case_id = serializers.CharField(
        source="trial.case.key", read_only=True, help_text="Case key of the trial."
    )
    attempt = serializers.IntegerField(
        source="trial.attempt", read_only=True, help_text="Attempt number 1..N of the trial."
    )
    reviewer = serializers.SerializerMethodField(
        help_text="Username of the reviewer, or the stored name of an imported label."
    )
    critique_preview = serializers.CharField(
        read_only=True,
        help_text="First 2,000 characters of the critique (the detail has all of it).",
    )
    critique_length = serializers.IntegerField(
        read_only=True, help_text="Length of the critique (characters)."
    )
    guidelines_version = serializers.IntegerField(
        source="guidelines.version", read_only=True, allow_null=True, help_text=GUIDELINES_HELP
    )

    class Meta:
        model = Label
        fields = [*LABEL_FIELDS, "guidelines_version", "critique_preview", "critique_length"]
        extra_kwargs = {f: {"help_text": LABEL_HELP[f]} for f in fields if f in LABEL_HELP}

    def get_reviewer(self, label) -> str:
        return label.reviewer.username if label.reviewer_id else label.reviewer_name


class LabelDetailSerializer(LabelSerializer):
    class Meta(LabelSerializer.Meta):
        fields = [*LABEL_FIELDS, "guidelines_version", "critique", "critique_length"]
        extra_kwargs = {
            **LabelSerializer.Meta.extra_kwargs,
            "critique": {"help_text": "The reviewer's critique (text)."},
        }


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                name,
                OpenApiTypes.UUID,
                description=f"Only labels on trials of this "
                f"{name.replace('_', ' ')} (UUID); not a UUID: 400.",
            )
            for name in ("run", "calibration_set", "trial")
        ]
    )
)
class LabelViewSet(viewsets.ReadOnlyModelViewSet):
    """Labels; a reviewer sees only their own, engineers and leads every label. Lists hold a
    critique preview; the detail (by id) the whole critique."""

    permission_classes = [IsViewer]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return Label.objects.none()
        qs = labels_visible(user=self.request.user, detail=self.action == "retrieve")
        for param, lookup, rows, noun in (
            ("run", "trial__run__uuid", Run.objects.all(), "run"),
            ("trial", "trial__uuid", Trial.objects.all(), "trial"),
            (
                "calibration_set",
                "trial__calibration_items__calibration_set__uuid",
                CalibrationSet.objects.all(),
                "calibration set",
            ),
        ):
            value = query_uuid_known(self.request, param, rows, noun)
            if value is not None:
                qs = qs.filter(**{lookup: value})
        return qs

    def get_serializer_class(self):
        return LabelDetailSerializer if self.action == "retrieve" else LabelSerializer


class LabelSubmitInput(NoUnknownFields, serializers.Serializer):
    trial = StrictUUIDField(help_text="UUID of the trial to label.")
    verdict = StrictChoiceField(
        choices=list(Label.Verdict.values),
        help_text="'pass' or 'fail', exactly (lower case, a string).",
    )
    critique = StrictCharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=services.CRITIQUE_MAX,
        help_text="Why (text, at most 20,000 characters; trimmed).",
    )
    expected_version = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        help_text="The version of your label you revise (0: you never labeled the trial; "
        "after an undo cleared it, the version of that clearing: versions only grow). Any "
        "other version than the current one is a 409 and nothing is saved. Omitted or null: "
        "no check.",
    )


class StaleLabelSerializer(serializers.Serializer):
    expected_version = serializers.ListField(
        child=serializers.CharField(), help_text="Why nothing was saved."
    )
    current_version = serializers.IntegerField(
        allow_null=True,
        help_text="The current version of your label's history (0: you never labeled the "
        "trial; a label an undo cleared keeps the version of its clearing; null: unknown, "
        "another save raced this one). Versions only grow, undo included.",
    )


class FlaggedRevisionSerializer(serializers.Serializer):
    version = serializers.IntegerField(help_text="Version of the flagged revision.")
    verdict = serializers.CharField(help_text="The verdict saved after the reveal.")
    critique = serializers.CharField(help_text="The critique saved after the reveal.")
    created_at = serializers.DateTimeField(help_text="When it was saved (ISO 8601).")


class LabelSubmitOutput(LabelDetailSerializer):
    outcome = serializers.CharField(
        help_text="created, revised, unchanged, or flagged: your label is frozen (you "
        "finished a calibration set holding the trial, so its judge verdicts are visible to "
        "you); the change is recorded as a flagged revision and the label (verdict, "
        "critique) stays the label of record."
    )
    frozen_detail = serializers.CharField(
        help_text="Why the label was not changed (flagged); empty otherwise."
    )
    revision_after_reveal = FlaggedRevisionSerializer(
        allow_null=True,
        help_text="Your newest revision after seeing the judge's verdicts (flagged), or null.",
    )

    class Meta(LabelDetailSerializer.Meta):
        fields = [
            *LabelDetailSerializer.Meta.fields,
            "outcome",
            "frozen_detail",
            "revision_after_reveal",
        ]


class LabelSubmitApi(APIView):
    """POST (JSON): save your label on a trial (``labeling.services.label_submit``);
    reviewers and leads. 201 with a new label; 200 with a revised (or identical, unchanged)
    one, or a frozen one (``outcome`` "flagged": the change is recorded as a flagged
    revision, ``frozen_detail`` says why, the label of record is unchanged); 409 when
    ``expected_version`` is stale; 400 naming the field; 404 unknown trial."""

    permission_classes = [IsLabeler]
    parser_classes = [StrictJSONParser]
    body_limit = "labels"  # 413 past 256 KiB, before parsing (core.bounds.BODY_MAX_BYTES)

    @extend_schema(
        request=LabelSubmitInput,
        responses={
            201: LabelSubmitOutput,
            200: LabelSubmitOutput,
            409: StaleLabelSerializer,
            400: OpenApiResponse(description="A field is bad; the body names it."),
            404: OpenApiResponse(description="No such trial."),
        },
    )
    def post(self, request):
        data = LabelSubmitInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        trial = get_object_or_404(Trial.objects.only("id", "uuid"), uuid=v["trial"])
        # A stale form is a DomainError "conflict": 409 with the current version (core.api.errors).
        label = services.label_submit(
            trial=trial,
            reviewer=request.user,
            verdict=v["verdict"],
            critique=v["critique"],
            expected_version=v["expected_version"],
        )
        status = 201 if label.outcome == "created" else 200
        outcome, flagged = label.outcome, label.flagged_revision
        label = labels_visible(user=request.user, detail=True).get(pk=label.pk)
        label.outcome, label.revision_after_reveal = outcome, flagged
        label.frozen_detail = (
            f"Not changed: {FROZEN_TEXT}. Your {flagged.verdict} is recorded as a flagged "
            f"revision after seeing the judge's verdicts; the label of record stays "
            f"{label.verdict}."
            if outcome == "flagged"
            else ""
        )
        return Response(LabelSubmitOutput(label).data, status=status)


class LabelUndoInput(NoUnknownFields, serializers.Serializer):
    trial = StrictUUIDField(help_text="UUID of the trial whose label you undo.")
    expected_version = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        help_text="The version of your label you undo; another current version is a 409 "
        "and nothing is undone. Omitted or null: no check.",
    )


class LabelUndoOutput(serializers.Serializer):
    trial = serializers.UUIDField(help_text="UUID of the trial.")
    version = serializers.IntegerField(
        help_text="The version of your label's history after the undo (the undo is a "
        "revision of its own: versions only grow); send it back as expected_version."
    )
    label = LabelDetailSerializer(
        allow_null=True,
        help_text="Your label after the undo (its previous save), or null when the undo "
        "cleared it or there was nothing to undo.",
    )


class LabelUndoApi(APIView):
    """POST (JSON): undo your last change of your label on a trial
    (``labeling.services.label_undo``); reviewers and leads. The undo is written as a new
    revision (versions only grow). 200 with the label after it (null: cleared or nothing to
    undo); 409 when ``expected_version`` is stale; 400 naming the field; 404 unknown trial."""

    permission_classes = [IsLabeler]
    parser_classes = [StrictJSONParser]
    body_limit = "labels"  # 413 past 256 KiB, before parsing (core.bounds.BODY_MAX_BYTES)

    @extend_schema(
        request=LabelUndoInput,
        responses={
            200: LabelUndoOutput,
            409: StaleLabelSerializer,
            400: OpenApiResponse(description="A field is bad; the body names it."),
            404: OpenApiResponse(description="No such trial."),
        },
    )
    def post(self, request):
        data = LabelUndoInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        trial = get_object_or_404(Trial.objects.only("id", "uuid"), uuid=v["trial"])
        label = services.label_undo(
            trial=trial, reviewer=request.user, expected_version=v["expected_version"]
        )
        if label is not None:
            label = labels_visible(user=request.user, detail=True).get(pk=label.pk)
        body = {
            "trial": trial.uuid,
            "version": label_version_get(trial_id=trial.id, reviewer=request.user),
            "label": label,
        }
        return Response(LabelUndoOutput(body).data)
