"""Calibration sets, read-only, with their calibration figures."""

from __future__ import annotations

import uuid

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, viewsets
from rest_framework.response import Response

from core.api.fields import query_uuid, query_uuid_known
from core.api.figures import ConfusionSerializer, KappaSerializer, RateSerializer
from core.api.permissions import IsViewer
from core.roles import ENGINEER, LEAD, user_has_role
from evals.models import Suite
from judges.models import JudgeVersion
from labeling.freeze import revisions_after_reveal
from labeling.models import CalibrationSet
from labeling.selectors import calibration_compute

WITHHELD = (
    "withheld: reviewers label blind, so the judge's figures are shown to engineers and leads only"
)
NO_JUDGE = "the set has no judge version: give ?judge_version=<uuid>"
NO_AGREEMENT = "n = 0: no item has both a reference label and an ok judge verdict"


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
    # DRF's metaclass takes a declared field off the class; its stubs see Field.label here.
    label = serializers.CharField(help_text="What the value is.")  # type: ignore[assignment]
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
    """``(figures, reason)``: the figures of ``judge_version_id`` (default: the set's) on the
    set, or None with the reason (a reviewer asked; no version). Http404 for an unknown one.
    """
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
