"""Suites and cases, read-only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers

from evals.api.runs._common import P_SUITE, P_TAG, H, ViewerViewSet, _by_uuid, _detail, _help, _tag
from evals.models import Case, Suite
from evals.tags import cases_tagged


class SuiteSerializer(serializers.ModelSerializer):
    class Meta:
        model = Suite
        fields = ["uuid", "name", "description", "kind", "created_at"]
        extra_kwargs = _help(
            fields,
            name="Unique suite name.",
            description="Free text.",
            kind="capability or regression.",
        )


class CaseSerializer(serializers.ModelSerializer):
    suite: serializers.SlugRelatedField[Suite] = serializers.SlugRelatedField(
        slug_field="uuid", read_only=True, help_text=H["suite"]
    )

    class Meta:
        model = Case
        fields = [
            "uuid",
            "suite",
            "key",
            "input",
            "expected",
            "context",
            "tags",
            "goal_state",
            "content_hash",
            "created_at",
            "retired_at",
        ]
        extra_kwargs = _help(
            fields,
            goal_state="An agent case's wanted final state (any JSON), null for none.",
            key="Case key, unique among the suite's active cases.",
            input="String or JSON object given to the target.",
            expected="Expected answer (any JSON) or null.",
            context="List of {id, text} context documents.",
            tags="List of tag strings.",
            content_hash="SHA-256 hex of the canonical content.",
            retired_at="When the case was retired (null: active).",
        )


@extend_schema_view(**_detail("suite"))
class SuiteViewSet(ViewerViewSet):
    """Suites."""

    queryset = Suite.objects.all()
    serializer_class = SuiteSerializer


@extend_schema_view(list=extend_schema(parameters=[P_SUITE, P_TAG]), **_detail("case"))
class CaseViewSet(ViewerViewSet):
    """Cases; ``?suite=<uuid>``, ``?tag=<tag>`` (filtered in the database)."""

    serializer_class = CaseSerializer

    def get_queryset(self):
        qs = _by_uuid(self.request, Case.objects.select_related("suite"), suite="suite__uuid")
        tag = _tag(self.request)
        return cases_tagged(qs, tag) if tag is not None else qs
