"""Notes on a calibration item (``labeling.notes``): its thread as the caller may read it,
and a new note."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import NoUnknownFields, StrictCharField
from core.api.parsers import StrictJSONParser
from core.api.permissions import IsLabeler
from labeling.models import CalibrationItem
from labeling.notes import item_note_add, item_notes_get


class ItemNoteSerializer(serializers.Serializer):
    author = serializers.CharField(source="author.get_username", help_text="Who wrote it.")
    by_lead = serializers.BooleanField(help_text="The author was a lead when writing it.")
    text = serializers.CharField(help_text="The note (Markdown source).")
    created_at = serializers.DateTimeField(help_text="When it was written (ISO 8601).")


class ItemNotesOutput(serializers.Serializer):
    trial = serializers.UUIDField(help_text="UUID of the item's trial.")
    notes = ItemNoteSerializer(many=True, help_text="The notes you may read, oldest first.")


class ItemNoteInput(NoUnknownFields, serializers.Serializer):
    text = StrictCharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The note (Markdown; at most 10,000 characters; not empty; no U+0000).",
    )


PATH = [
    OpenApiParameter(
        "set_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the set."
    ),
    OpenApiParameter(
        "trial_id",
        OpenApiTypes.UUID,
        OpenApiParameter.PATH,
        description="UUID of the item's trial (in the set).",
    ),
]


def _item(set_id, trial_id) -> CalibrationItem:
    return get_object_or_404(
        CalibrationItem.objects.select_related("trial"),
        calibration_set__uuid=set_id,
        trial__uuid=trial_id,
    )


class ItemNotesApi(APIView):
    """GET: the notes of the item of trial ``trial_id`` in calibration set ``set_id`` that you
    may read: reviewers see their own notes, and other people's only while they hold a label
    of record on the item (labeled and not undone); leads see every note. POST (JSON
    ``{"text"}``): add your note; 201 with the thread as you now see it. Reviewers and leads
    (others 403); 404 when the set or the trial in it is unknown; 400 naming ``text`` when it
    is empty or holds U+0000 or a lone surrogate, 413 past 10,000 characters."""

    permission_classes = [IsLabeler]
    parser_classes = [StrictJSONParser]
    body_limit = "labels"  # 413 past 256 KiB, before parsing (core.bounds.BODY_MAX_BYTES)

    @extend_schema(
        parameters=PATH,
        responses={
            200: ItemNotesOutput,
            404: OpenApiResponse(description="No such set or trial in it."),
        },
    )
    def get(self, request, set_id, trial_id):
        item = _item(set_id, trial_id)
        notes = item_notes_get(item=item, user=request.user)
        return Response(ItemNotesOutput({"trial": item.trial.uuid, "notes": notes}).data)

    @extend_schema(
        parameters=PATH,
        request=ItemNoteInput,
        responses={
            201: ItemNotesOutput,
            400: OpenApiResponse(description="The text is bad; the body names the field."),
            404: OpenApiResponse(description="No such set or trial in it."),
            413: OpenApiResponse(description="The note is too long."),
        },
    )
    def post(self, request, set_id, trial_id):
        item = _item(set_id, trial_id)
        data = ItemNoteInput(data=request.data)
        data.is_valid(raise_exception=True)
        item_note_add(item=item, author=request.user, text=data.validated_data["text"])
        notes = item_notes_get(item=item, user=request.user)
        return Response(
            ItemNotesOutput({"trial": item.trial.uuid, "notes": notes}).data, status=201
        )
