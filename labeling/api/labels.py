"""Labels, read-only, and submitting and undoing a label."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
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
    query_uuid_known,
)
from core.api.parsers import StrictJSONParser
from core.api.permissions import IsLabeler, IsViewer
from evals.models import Run, Trial
from labeling.freeze import FROZEN_TEXT
from labeling.labels import CRITIQUE_MAX, label_submit, label_undo
from labeling.models import CalibrationSet, Label
from labeling.selectors import label_version_get, labels_visible

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
        max_length=CRITIQUE_MAX,
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
    """POST (JSON): save your label on a trial (``labeling.labels.label_submit``);
    reviewers and leads. 201 with a new label; 200 with a revised (or identical, unchanged)
    one, or a frozen one (``outcome`` "flagged": the change is recorded as a flagged
    revision, ``frozen_detail`` says why, the label of record is unchanged); 409 when
    ``expected_version`` is stale, or when the trial is an item of a calibration set whose
    lead assigned it to other reviewers (``field`` "trial", the detail naming the trial and
    its case); 400 naming the field; 404 unknown trial."""

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
        label = label_submit(
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
    # DRF's metaclass takes a declared field off the class; its stubs see Field.label here.
    label = LabelDetailSerializer(  # type: ignore[assignment]
        allow_null=True,
        help_text="Your label after the undo (its previous save), or null when the undo "
        "cleared it or there was nothing to undo.",
    )


class LabelUndoApi(APIView):
    """POST (JSON): undo your last change of your label on a trial
    (``labeling.labels.label_undo``); reviewers and leads. The undo is written as a new
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
        label = label_undo(
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
