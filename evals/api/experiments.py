"""Experiments from the API: start one, list them, read one (its variants' progress and, once
every variant run has finished, the decision), and settle one with more trials (racing).

Engineers and leads only: an experiment's decision is read from every variant's verdicts,
so reviewers (blind reviewing, ``evals.blindness``) and outsiders are refused (403) on every
endpoint, as they are when starting a run. Thin: parse, call one service, render
(``evals.experiments.render.experiment_json``)."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import (
    NoUnknownFields,
    StrictCharField,
    StrictChoiceField,
    StrictFloatField,
    StrictIntegerField,
    StrictUUIDField,
    query_uuid_known,
)
from core.api.pagination import IdCursorPagination
from core.api.permissions import IsRunner
from core.bounds import SEED_MAX
from core.errors import DomainError
from core.http import uuid_or_404
from evals.api.runs._common import H
from evals.experiments.decision import experiment_decision, experiment_variants
from evals.experiments.racing import ROUNDS_MAX, TRIALS_PER_ROUND_MAX, experiment_settle_start
from evals.experiments.render import experiment_json, experiment_ready
from evals.experiments.spec import experiment_spec_start
from evals.experiments.start import ALPHA_RANGE, NAME_MAX
from evals.models import Experiment, ExperimentVariant, Suite
from evals.runner.start import DEFAULT_TRIALS_PER_CASE, MAX_TRIALS_PER_CASE

P_EXPERIMENT = OpenApiParameter(
    "experiment_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="UUID of the experiment."
)


class ExperimentStartInput(NoUnknownFields, serializers.Serializer):
    suite = StrictUUIDField(help_text=H["suite"])
    name = StrictCharField(
        max_length=NAME_MAX,
        help_text="Experiment name, unique in its suite; each variant's "
        'run is named "<name> · <label>".',
    )
    variants = serializers.JSONField(
        help_text="2 to 20 variants, each {label, target} (a target as POST /api/runs/start "
        "takes it) or {label, preset} (the name of a target preset declared with "
        "apply_config). Labels unique (case-insensitive). An error names "
        "variants[i].target.<field>, variants[i].label or variants[i].preset."
    )
    graders = serializers.JSONField(
        required=False,
        default=None,
        help_text="Grader set, as POST /api/runs/start takes it; or give grader_set.",
    )
    grader_set = StrictCharField(
        required=False,
        default=None,
        allow_null=True,
        help_text="The name of a grader set preset declared with apply_config (instead of "
        "graders).",
    )
    trials_per_case = StrictIntegerField(
        min_value=1,
        max_value=MAX_TRIALS_PER_CASE,
        required=False,
        default=DEFAULT_TRIALS_PER_CASE,
        help_text=f"N, attempts per case for every variant (1..{MAX_TRIALS_PER_CASE}; default "
        f"{DEFAULT_TRIALS_PER_CASE}).",
    )
    alpha = StrictFloatField(
        required=False,
        default=0.05,
        help_text=f"1 − the best set's confidence ({ALPHA_RANGE[0]} to {ALPHA_RANGE[1]}; "
        "default 0.05).",
    )
    metric = StrictChoiceField(
        choices=Experiment.Metric.values,
        required=False,
        default=Experiment.Metric.PASS_RATE,
        help_text="pass_rate (default) or pass_hat_k (with k).",
    )
    k = StrictIntegerField(
        min_value=1,
        max_value=MAX_TRIALS_PER_CASE,
        required=False,
        default=1,
        help_text="k of pass^k (1 to trials_per_case); 1 for pass_rate.",
    )
    seed = StrictIntegerField(
        min_value=0,
        max_value=SEED_MAX,
        required=False,
        default=None,
        allow_null=True,
        help_text="Given to every variant whose target takes a seed and names none, so a "
        "case and attempt share their seed across variants.",
    )
    source_version = StrictCharField(
        required=False, default="", allow_blank=True, help_text="Version label of the system."
    )


class ExperimentSettleInput(NoUnknownFields, serializers.Serializer):
    rounds = StrictIntegerField(
        min_value=1,
        max_value=ROUNDS_MAX,
        required=False,
        default=3,
        help_text=f"At most this many rounds of more trials (1..{ROUNDS_MAX}; default 3).",
    )
    trials_per_round = StrictIntegerField(
        min_value=1,
        max_value=TRIALS_PER_ROUND_MAX,
        required=False,
        default=5,
        help_text="Trials added per sampled case to each variant still in the set, per round "
        f"(1..{TRIALS_PER_ROUND_MAX}; default 5).",
    )


EXPERIMENT_SCHEMA = OpenApiResponse(
    response=OpenApiTypes.OBJECT,
    description="The experiment: uuid, suite, name, alpha, metric, k, trials_per_case, seed, "
    "created_at; ready (every variant run finished); variants [{label, position, run, "
    "status, status_shown, progress {finished, planned, errored, cancelled}}]; racing (null, "
    "or {status, rounds, trials_per_round, looks}); decision (null until ready, then {decided, "
    "best, sentence, cheapest, cheapest_reason, pareto, notes, method, alpha, level, cases, "
    "variants [{label, estimate, low, high, in_set, out_reason, beaten_by, passed, graded, "
    "cost_usd, cost_per_trial, cost_per_pass, cost_per_pass_low, cost_per_pass_high, "
    "on_front}]}). Figures are in [0, 1]; costs in USD, null when unknown.",
)


def _experiment_response(experiment: Experiment, status: int, *, with_decision: bool) -> Response:
    variants = experiment_variants(experiment=experiment)
    decision = None
    if with_decision and experiment_ready(variants):
        decision = experiment_decision(experiment=experiment)
    return Response(experiment_json(experiment, variants, decision=decision), status=status)


def _experiment(experiment_id: str) -> Experiment:
    return get_object_or_404(
        Experiment.objects.select_related("suite"), uuid=uuid_or_404(experiment_id, "experiment")
    )


class ExperimentsApi(APIView):
    """GET: the experiments, oldest first, cursor-paged (``?suite=<uuid>``: one suite's; a
    UUID naming no suite is a 404 on ``suite``). Each without its decision: read one for it.

    POST: start an experiment (``evals.experiments.start.experiment_start``): one run per
    variant, all or nothing. 201 with the experiment; 400 naming the field
    (``variants[1].target.model``, ``alpha``, ``graders[0].config.pattern``); 404 for an
    unknown suite; 409 when the suite already has an experiment of that name; 413 for a body
    over 256 KiB. Strict JSON: ``"3"`` is not 3, ``"false"`` is not false.

    Engineers and leads; reviewers, outsiders and anonymous callers are refused (403)."""

    permission_classes = [IsRunner]
    body_limit = "run_start"

    @extend_schema(
        operation_id="experiments_list",
        parameters=[
            OpenApiParameter(
                "suite", OpenApiTypes.UUID, OpenApiParameter.QUERY, description="Only this suite's."
            )
        ],
        responses={200: EXPERIMENT_SCHEMA},
    )
    def get(self, request):
        variants = ExperimentVariant.objects.select_related("run").order_by("position")
        rows = Experiment.objects.select_related("suite").prefetch_related(
            Prefetch("variants", queryset=variants)
        )
        suite = query_uuid_known(request, "suite", Suite.objects.all(), "suite")
        if suite is not None:
            rows = rows.filter(suite__uuid=suite)
        paginator = IdCursorPagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        return paginator.get_paginated_response(
            [experiment_json(e, list(e.variants.all())) for e in page]
        )

    @extend_schema(
        operation_id="experiments_start",
        request=ExperimentStartInput,
        responses={
            201: EXPERIMENT_SCHEMA,
            400: OpenApiResponse(description="A field refused; the body names it."),
            404: OpenApiResponse(description="No suite with that UUID."),
            409: OpenApiResponse(description="The suite has an experiment of that name."),
        },
    )
    def post(self, request):
        data = ExperimentStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        spec = dict(data.validated_data)
        suite_id = spec.pop("suite")
        suite = Suite.objects.filter(uuid=suite_id).first()
        if suite is None:
            raise DomainError(f"no suite with id {suite_id}", field="suite", code="not_found")
        experiment = experiment_spec_start(spec=spec, suite=suite, started_by=request.user)
        return _experiment_response(experiment, 201, with_decision=False)


class ExperimentDetailApi(APIView):
    """GET: one experiment: its variants (label, run UUID, status, progress) and, once every
    variant run has finished, the decision: the best set (the variants that could be the best
    at confidence 1 − alpha), each variant's estimate and interval, in the set or why out,
    cost per trial and per passing trial with its interval, the cheapest within the set, the
    Pareto front, one sentence, notes, method and alpha (docs/statistics.md, "Experiments").
    While it races, the set is the intersection of the looks' sets. 404 for an unknown
    experiment. Engineers and leads; others 403."""

    permission_classes = [IsRunner]

    @extend_schema(parameters=[P_EXPERIMENT], responses={200: EXPERIMENT_SCHEMA})
    def get(self, request, experiment_id):
        return _experiment_response(_experiment(experiment_id), 200, with_decision=True)


class ExperimentSettleApi(APIView):
    """POST: settle an experiment with more trials (racing,
    ``evals.experiments.racing.experiment_settle_start``): the design is fixed now; each round
    adds ``trials_per_round`` trials on the cases that separate the variants still in the set,
    to those variants only, until one is left or ``rounds`` are spent. 202 with the experiment
    (poll it: ``racing.status`` running, done or failed). 400 naming ``rounds`` or
    ``trials_per_round``; 409 when a variant run has not finished or settling was already
    asked; 404 for an unknown experiment. Engineers and leads; others 403."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=ExperimentSettleInput,
        parameters=[P_EXPERIMENT],
        responses={
            202: EXPERIMENT_SCHEMA,
            409: OpenApiResponse(description="Not finished, or already settling."),
        },
    )
    def post(self, request, experiment_id):
        experiment = _experiment(experiment_id)
        data = ExperimentSettleInput(data=request.data)
        data.is_valid(raise_exception=True)
        experiment = experiment_settle_start(
            experiment=experiment,
            rounds=data.validated_data["rounds"],
            trials_per_round=data.validated_data["trials_per_round"],
            by=request.user,
        )
        experiment = _experiment(str(experiment.uuid))
        return _experiment_response(experiment, 202, with_decision=True)
