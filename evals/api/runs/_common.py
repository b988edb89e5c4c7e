"""What the resources of ``evals.api.runs`` share: help texts, list filters and their OpenAPI
parameters, the read-only viewset. A malformed filter is a 400 naming it, never a 500 or an
empty page; ``?tag=`` matches a whole tag (``evals.tags``)."""

from __future__ import annotations

from django.db.models import QuerySet, TextChoices
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets

from core.api.fields import query_uuid_known
from core.api.permissions import IsViewer
from evals.models import Case, Run, Suite

H = {  # help text of every exposed field, with units
    "uuid": "Stable identifier (UUID); used in URLs.",
    "created_at": "When the row was created (ISO 8601, UTC).",
    "suite": "UUID of the suite.",
    "run": "UUID of the run.",
    "trial": "UUID of the trial.",
    "case": "UUID of the case.",
}


def _help(fields, **extra) -> dict:
    texts = {**H, **extra}
    return {f: {"help_text": texts[f]} for f in fields if f in texts}


# What each UUID filter of the lists names: a UUID naming none of these is a 404.
FILTER_ROWS = {"suite": (Suite, "suite"), "run": (Run, "run"), "case": (Case, "case")}


def _by_uuid(request, qs: QuerySet, **params: str) -> QuerySet:
    """``qs`` filtered by the UUID parameters in ``params`` (param -> lookup): malformed is a 400,
    a UUID naming nothing a 404 on the parameter (``core.api.fields.query_uuid_known``)."""
    for param, lookup in params.items():
        model, noun = FILTER_ROWS[param]
        value = query_uuid_known(request, param, model._default_manager.all(), noun)
        if value is not None:
            qs = qs.filter(**{lookup: value})
    return qs


def _by_status(request, qs: QuerySet, statuses: type[TextChoices]) -> QuerySet:
    """``qs`` filtered by ``?status=``; an unknown value is a 400 listing the allowed ones."""
    value = request.query_params.get("status")
    if not value:
        return qs
    if value not in statuses.values:
        raise serializers.ValidationError(
            {"status": [f"unknown status {value[:100]!r}; allowed: {', '.join(statuses.values)}"]}
        )
    return qs.filter(status=value)


def _tag(request) -> str | None:
    """``?tag=`` as one whole tag matched exactly, None when absent or empty."""
    value = request.query_params.get("tag")
    return value or None


def _param(
    name: str, description: str, *, uuid_type: bool = False, enum: list[str] | None = None
) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        OpenApiTypes.UUID if uuid_type else OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description=description,
        enum=enum,
    )


P_SUITE = _param("suite", "Only rows of the suite with this UUID.", uuid_type=True)
P_RUN = _param("run", "Only rows of the run with this UUID.", uuid_type=True)
P_CASE = _param("case", "Only trials of the case with this UUID.", uuid_type=True)
P_TAG = _param(
    "tag",
    "Only rows whose case has this tag (whole tag, exact match: "
    "'reg' does not match 'regression').",
)


def _detail(noun: str, *, by_id: bool = False) -> dict:
    """``extend_schema_view`` arguments describing the detail's path parameter."""
    name, kind = ("id", OpenApiTypes.INT) if by_id else ("uuid", OpenApiTypes.UUID)
    text = f"Id of the {noun}." if by_id else f"UUID of the {noun}."
    return {
        "retrieve": extend_schema(
            parameters=[OpenApiParameter(name, kind, OpenApiParameter.PATH, description=text)]
        )
    }


def _status(statuses: type[TextChoices]) -> OpenApiParameter:
    return _param(
        "status",
        "Only rows with this status; any other value is a 400.",
        enum=list(statuses.values),
    )


class ViewerViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsViewer]
    lookup_field = "uuid"
    # Any path segment reaches the view, so the role is checked before the id (an outsider
    # gets 403 for /runs/0.5/ too); a malformed id is then a 404 (DRF's get_object_or_404).
    lookup_value_regex = "[^/]+"
