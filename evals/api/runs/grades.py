"""Grades, read-only, and grading a finished run with new deterministic graders."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsRunner
from core.http import uuid_or_404
from evals.api.runs._common import (
    P_RUN,
    P_SUITE,
    H,
    ViewerViewSet,
    _by_status,
    _by_uuid,
    _detail,
    _help,
    _status,
)
from evals.blindness import grades_visible_to
from evals.grading.contract.decisions import run_decisions
from evals.grading.recorded import run_grade
from evals.models import Grade, Run


class GradeSerializer(serializers.ModelSerializer):
    trial = serializers.UUIDField(source="trial.uuid", read_only=True, help_text=H["trial"])
    judge_version = serializers.UUIDField(
        source="judge_version.uuid",
        read_only=True,
        allow_null=True,
        help_text="UUID of the judge version (null: deterministic grader).",
    )

    class Meta:
        model = Grade
        fields = [
            "id",
            "trial",
            "grader",
            "grader_version",
            "judge_version",
            "status",
            "passed",
            "score",
            "reason",
            "gating",
            "created_at",
        ]
        extra_kwargs = _help(
            fields,
            id="Grade id (grades have no UUID).",
            grader="Grader key.",
            grader_version="Grader version label.",
            status="ok, error, or not_judged (a judge rung the grader ladder skipped: an "
            "earlier gating grader already failed the trial).",
            passed="Verdict (null: errored or not judged, not counted).",
            score="Score 0..1 (null: none).",
            reason="Why.",
            gating="Counts toward the pass rate and the gate.",
        )


@extend_schema_view(
    list=extend_schema(parameters=[P_RUN, P_SUITE, _status(Grade.Status)]),
    **_detail("grade", by_id=True),
)
class GradeViewSet(ViewerViewSet):
    """Grades; ``?run=<uuid>``, ``?suite=<uuid>``, ``?status=``. Looked up by id. A reviewer
    gets no grade of a trial whose case shares its input with an item they still have to
    label (``evals.blindness``): absent from lists, 404 by id."""

    lookup_field = "pk"
    serializer_class = GradeSerializer

    def get_queryset(self):
        qs = grades_visible_to(
            Grade.objects.select_related("trial", "judge_version"), self.request.user
        )
        qs = _by_uuid(self.request, qs, run="trial__run__uuid", suite="trial__run__suite__uuid")
        return _by_status(self.request, qs, Grade.Status)


class RunGradeInput(serializers.Serializer):
    graders = serializers.JSONField(
        help_text="Grader set of new deterministic graders: list of {key, kind, config, "
        "gating?, version?}; keys must be new to the run; no judge."
    )


class RunGradeOutput(serializers.Serializer):
    run = serializers.UUIDField(help_text=H["run"])
    graders = serializers.ListField(
        child=serializers.CharField(), help_text="Keys of the graders added to the run."
    )
    trials = serializers.IntegerField(help_text="Ok trials graded (current attempts).")
    grades = serializers.IntegerField(help_text="Grades written.")
    decisions = serializers.DictField(
        allow_null=True,
        help_text="Contract decisions per run (counts by decision: rejected, review, "
        "accepted, errored, not_graded, infrastructure_error); null without a contract grader.",
    )


class RunGradeApi(APIView):
    """POST: grade a finished run's ok trials with new deterministic graders
    (``evals.grading.recorded.run_grade``), e.g. a contract on imported outputs; 200 with
    what was graded and the contract decisions. 400 naming the field on a bad grader, 409
    when the run is not finished or a key is taken."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=RunGradeInput,
        responses={200: RunGradeOutput},
        parameters=[
            OpenApiParameter(
                "run_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the run."
            )
        ],
    )
    def post(self, request, run_id):
        run = get_object_or_404(
            Run.objects.select_related("suite"), uuid=uuid_or_404(run_id, "run")
        )
        data = RunGradeInput(data=request.data)
        data.is_valid(raise_exception=True)
        summary = run_grade(run=run, graders=data.validated_data["graders"], by=request.user)
        decisions = run_decisions(run=run)
        out = {
            "run": run.uuid,
            "graders": list(summary.keys),
            "trials": summary.trials,
            "grades": summary.grades,
            "decisions": decisions.counts if decisions.graded else None,
        }
        return Response(RunGradeOutput(out).data, status=200)
