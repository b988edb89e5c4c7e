"""Baselines: the history, read-only, and setting one."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import StrictCharField, StrictUUIDField
from core.api.permissions import IsRunner
from evals.api.runs._common import P_SUITE, H, ViewerViewSet, _by_uuid, _detail, _help
from evals.baselines import baseline_set
from evals.models import Baseline, Run


class BaselineSerializer(serializers.ModelSerializer):
    suite = serializers.UUIDField(source="suite.uuid", read_only=True, help_text=H["suite"])
    run = serializers.UUIDField(source="run.uuid", read_only=True, help_text=H["run"])

    class Meta:
        model = Baseline
        fields = ["id", "suite", "run", "set_at", "note"]
        extra_kwargs = _help(
            fields,
            id="Baseline row id.",
            set_at="When it was set (UTC).",
            note="Why (at most 500 characters).",
        )


@extend_schema_view(list=extend_schema(parameters=[P_SUITE]), **_detail("baseline row", by_id=True))
class BaselineViewSet(ViewerViewSet):
    """Baselines (history, oldest first); ``?suite=<uuid>``. Looked up by id."""

    lookup_field = "pk"
    serializer_class = BaselineSerializer

    def get_queryset(self):
        qs = Baseline.objects.select_related("suite", "run")
        return _by_uuid(self.request, qs, suite="suite__uuid")


class BaselineSetInput(serializers.Serializer):
    run = StrictUUIDField(help_text="UUID of the finished run to make the baseline.")
    note = StrictCharField(
        max_length=500,
        required=False,
        default="",
        allow_blank=True,
        help_text="Why (at most 500 characters).",
    )


class BaselineSetApi(APIView):
    """POST: make a finished run its suite's baseline (``baseline_set``); 201."""

    permission_classes = [IsRunner]

    @extend_schema(request=BaselineSetInput, responses={201: BaselineSerializer})
    def post(self, request):
        data = BaselineSetInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = get_object_or_404(
            Run.objects.select_related("suite"), uuid=data.validated_data["run"]
        )
        baseline = baseline_set(
            suite=run.suite, run=run, by=request.user, note=data.validated_data["note"]
        )
        return Response(BaselineSerializer(baseline).data, status=201)
