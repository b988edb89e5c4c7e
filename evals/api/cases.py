"""The case editor's API, thin over ``evals.case_changes`` (the pages' services); docs/api.md.

- ``POST /api/suites/<suite>/cases``: add (201, 200 unchanged; 409 when the key holds other
  content and ``replace`` is not true);
- ``GET .../cases/<case>``: the case, its state in ``ETag``;
- ``PATCH .../cases/<case>``: edit (409 when not active or the new key is taken);
  ``If-Match`` is required (428 without, 412 when stale, ``*`` for any);
- ``POST .../cases/<case>/retire``: retire (409 when retired).

Engineers and leads only (403). A refused content is a 400 naming the field."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import NoUnknownFields, StrictBooleanField, StrictCharField, StrictUUIDField
from core.api.permissions import IsRunner
from core.errors import DomainError
from core.http import uuid_or_404
from evals.api.runs.suites import CaseSerializer
from evals.case_changes import (
    WRITE_ACTIONS,
    case_add,
    case_edit,
    case_etag,
    case_retire,
    source_trial_resolve,
)
from evals.cases import CaseSpec
from evals.models import Case, Suite

FIELD_HELP = {
    "key": "Case key, unique among the suite's active cases (1..200 characters, no spaces "
    "before or after).",
    "input": "String or JSON object given to the target.",
    "expected": 'Expected answer: any JSON value, null for none ("false" is a string, '
    "false a boolean).",
    "context": "List of {id, text} context documents.",
    "tags": "List of distinct non-empty tag strings (at most 50).",
    "goal_state": "An agent case's wanted final state (any JSON), null for none.",
}


class CaseInput(NoUnknownFields, serializers.Serializer):
    key = StrictCharField(trim_whitespace=False, help_text=FIELD_HELP["key"])
    input = serializers.JSONField(help_text=FIELD_HELP["input"])
    expected = serializers.JSONField(
        required=False, allow_null=True, default=None, help_text=FIELD_HELP["expected"]
    )
    # DRF's metaclass takes a declared field off the class (its stubs see Field.context
    # here), and a JSONField's default may be any JSON value (its stubs take a mapping).
    context = serializers.JSONField(  # type: ignore[assignment]
        required=False,
        default=list,  # type: ignore[arg-type]
        help_text=FIELD_HELP["context"],
    )
    tags = serializers.ListField(
        child=StrictCharField(trim_whitespace=False),
        required=False,
        default=list,
        help_text=FIELD_HELP["tags"],
    )
    goal_state = serializers.JSONField(
        required=False, allow_null=True, default=None, help_text=FIELD_HELP["goal_state"]
    )


class CaseCreateInput(CaseInput):
    replace = StrictBooleanField(
        required=False,
        default=False,
        help_text="When the key holds an active case with other content: true retires it "
        "and creates this one; false (default) answers 409.",
    )
    source_trial = StrictUUIDField(
        required=False,
        allow_null=True,
        default=None,
        help_text="UUID of the trial this case was made from (recorded in the history).",
    )


class CaseEditInput(CaseInput):
    """Every field optional: a field left out keeps the case's value."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
            field.default = serializers.empty


class CaseWriteOutput(serializers.Serializer):
    action = serializers.ChoiceField(
        choices=list(WRITE_ACTIONS),
        help_text="What the write did: created, replaced (the old case is retired, "
        "``case`` is the new one), retagged (tags saved in place), retired, unchanged.",
    )
    case = CaseSerializer(help_text="The case now (the retired one for a retire).")


def _out(done, status: int = 200) -> Response:
    data = {"action": done.action, "case": done.case}
    return Response(CaseWriteOutput(data).data, status=status)


SUITE_PARAM = OpenApiParameter(
    "suite_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the suite."
)
CASE_PARAM = OpenApiParameter(
    "case_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the case."
)


IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=True,
    description="The ETag of the case as you read it (GET this URL, or a previous write's "
    "answer): the edit is made only if the case is still in that state, else 412 with the "
    'current "etag" and nothing changed. "*" edits whatever the case holds now. Missing: 428.',
)
ETAG = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=[200],
    description="The case's state (a quoted strong entity tag): send it back in If-Match.",
)


def _if_match(request) -> list[str] | None:
    """``If-Match``'s entity tags (None for ``*``); ``DomainError`` 428 when missing or empty."""
    header = (request.headers.get("If-Match") or "").strip()
    if not header:
        raise DomainError(
            "a case edit must name the state it changes: send If-Match with the ETag of the "
            'case as you read it (GET it), or "*" to edit whatever it holds now',
            field="If-Match",
            code="precondition_required",
        )
    if header == "*":
        return None
    return [tag.strip() for tag in header.split(",") if tag.strip()]


def _case(suite_id, case_id) -> Case:
    suite = get_object_or_404(Suite, uuid=uuid_or_404(suite_id, "suite"))
    return get_object_or_404(
        Case.objects.select_related("suite"), uuid=uuid_or_404(case_id, "case"), suite=suite
    )


class SuiteCaseCreateApi(APIView):
    """POST: add a case to the suite (``evals.case_changes.case_add``)."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=CaseCreateInput,
        responses={201: CaseWriteOutput, 200: CaseWriteOutput},
        parameters=[SUITE_PARAM],
    )
    def post(self, request, suite_id):
        suite = get_object_or_404(Suite, uuid=uuid_or_404(suite_id, "suite"))
        data = CaseCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        trial = source_trial_resolve(v["source_trial"])
        spec = CaseSpec(**{k: v[k] for k in FIELD_HELP})
        done = case_add(
            suite=suite,
            spec=spec,
            by=request.user,
            via="api",
            source_trial=trial,
            replace=v["replace"],
        )
        return _out(done, status=200 if done.action == "unchanged" else 201)


class SuiteCaseApi(APIView):
    """GET: the case and its ``ETag``; PATCH: edit it (``case_edit``) under ``If-Match``."""

    permission_classes = [IsRunner]

    @extend_schema(
        description="The case, with its state in the ETag header: send it back in If-Match "
        "to edit the case.",
        responses={200: CaseSerializer},
        parameters=[SUITE_PARAM, CASE_PARAM, ETAG],
    )
    def get(self, request, suite_id, case_id):
        case = _case(suite_id, case_id)
        return Response(CaseSerializer(case).data, headers={"ETag": case_etag(case)})

    @extend_schema(
        description="Edit the case (fields left out keep their value) if it is still in the "
        "state If-Match names: new content or key retires it and answers the new case, new "
        "tags alone are saved in place. The answer's ETag is the case's state now.",
        request=CaseEditInput,
        responses={
            200: CaseWriteOutput,
            412: OpenApiResponse(description="If-Match names a state the case has left."),
            428: OpenApiResponse(description="No If-Match."),
        },
        parameters=[SUITE_PARAM, CASE_PARAM, IF_MATCH, ETAG],
    )
    def patch(self, request, suite_id, case_id):
        case = _case(suite_id, case_id)
        if_match = _if_match(request)
        data = CaseEditInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        spec = CaseSpec(**{k: v.get(k, getattr(case, k)) for k in FIELD_HELP})
        done = case_edit(case=case, spec=spec, by=request.user, via="api", if_match=if_match)
        response = _out(done)
        response["ETag"] = case_etag(done.case)
        return response


class SuiteCaseRetireApi(APIView):
    """POST: retire a case (``evals.case_changes.case_retire``)."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=None, responses={200: CaseWriteOutput}, parameters=[SUITE_PARAM, CASE_PARAM]
    )
    def post(self, request, suite_id, case_id):
        case = _case(suite_id, case_id)
        return _out(case_retire(case=case, by=request.user, via="api"))
