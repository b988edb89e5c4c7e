"""API of comparisons: ``POST /api/gate``, ``GET /api/comparisons/``, and downloads of a run,
its labels and a comparison. Thin: parse strictly, call one domain function, render.

The gate answers exactly what ``manage.py gate --json`` prints; a comparison is the page's
with the gate's decision under the default policy, in the same shape. Downloads reuse
``interop.exports`` and ``interop.run_file``. Every endpoint is open to the viewer roles."""

from __future__ import annotations

import json
import re
from decimal import Decimal

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.fields import (
    StrictBooleanField,
    StrictFloatField,
    StrictIntegerField,
    StrictUUIDField,
    query_uuid_required,
)
from core.api.parsers import StrictJSONParser
from core.api.permissions import IsViewer
from core.errors import DomainError
from core.http import uuid_or_404
from core.ids import uuid_parse
from evals.baselines import baseline_current
from evals.blindness import BLIND_COMPARISON, comparison_is_blind
from evals.comparison.agents import agent_moves_for
from evals.comparison.baseline_verdicts import verdict_remember
from evals.comparison.cache import comparison_cached_get
from evals.comparison.gate import (
    ALPHA_MAX,
    ALPHA_MIN,
    alpha_check,
    comparison_plan,
    gate_decide,
    gate_evaluate,
)
from evals.comparison.render import gate_json
from evals.comparison.run_document import run_document_read
from evals.comparison.topup import (
    comparison_decision,
    top_up_refused,
    top_up_result,
    top_up_settled_get,
    top_up_start,
)
from evals.models import Run, TopUp

DEFAULT_ALPHA = 0.05  # manage.py gate's default --alpha
DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?|\.[0-9]+")


# ---- POST /api/gate -------------------------------------------------------------------

RUN_DOC = (
    "An export_run document (format 'assay-run', version 1: the committed baseline "
    "file) embedded as a JSON object, instead of a run UUID."
)


@extend_schema_field({"type": "object", "additionalProperties": True})
class RunDocumentField(serializers.JSONField):
    """An embedded ``export_run`` document: a JSON object, checked by ``run_document_read``."""


class GateInput(serializers.Serializer):
    head = StrictUUIDField(required=False, help_text="UUID of the head run (the change).")
    head_file = RunDocumentField(required=False, help_text=RUN_DOC)
    base = StrictUUIDField(
        required=False,
        help_text="UUID of the base run; default: the head suite's current baseline.",
    )
    base_file = RunDocumentField(required=False, help_text=RUN_DOC)
    alpha = StrictFloatField(
        required=False,
        default=DEFAULT_ALPHA,
        help_text="Two-sided level of the test, a JSON number from 1e-6 to "
        "0.5 (both included); the intervals are at 1 - alpha. "
        "Default 0.05.",
    )
    max_errored_fraction = StrictFloatField(
        required=False,
        default=0.0,
        help_text="Errored trials allowed per run, a fraction in [0, 1] (default 0: any "
        "errored trial means exit 2).",
    )
    allow_untrusted = StrictBooleanField(
        required=False,
        default=False,
        help_text="Gate on grades from judge versions that are not trusted (JSON boolean).",
    )
    allow_incomparable = StrictBooleanField(
        required=False,
        default=False,
        help_text="Test the shared cases even when suite, grader set or judge version "
        "differ; the problems are still reported (JSON boolean).",
    )
    top_up = StrictBooleanField(
        required=False,
        default=False,
        help_text="Settle suspect cases with more trials of both runs (runs executed by "
        "Assay and replayable): answered 202 with the top-up to poll at "
        "/api/top-ups/<uuid>/, whose result is this endpoint's usual body. When no trial "
        "can be added (files, imported runs) the answer is 200 with the decision on the "
        "trials there are, a note naming why and the trials that would settle each "
        "suspect. Decided under the default policy (no allow_* flag, no errored "
        "fraction).",
    )
    max_trials_per_case = StrictIntegerField(
        required=False,
        default=None,
        allow_null=True,
        min_value=1,
        help_text="With top_up: trials a side a case may reach, first ones included (whole "
        "rounds only; default 4 x N).",
    )
    max_cost_usd = serializers.DecimalField(
        required=False,
        default=None,
        allow_null=True,
        max_digits=14,
        decimal_places=8,
        min_value=Decimal("0.00000001"),
        help_text="With top_up: stop before a round that would take the added trials' cost "
        'past this many USD (a decimal string such as "2.50").',
    )

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({k: ["unknown field"] for k in unknown})
        if ("head" in attrs) == ("head_file" in attrs):
            raise serializers.ValidationError({"head": ["give exactly one of head and head_file"]})
        if "base" in attrs and "base_file" in attrs:
            raise serializers.ValidationError({"base": ["give at most one of base and base_file"]})
        if "head_file" in attrs and not ("base" in attrs or "base_file" in attrs):
            raise serializers.ValidationError(
                {"base": ["required when head_file is given (a file has no suite baseline)"]}
            )
        try:
            alpha_check(attrs["alpha"])
        except DomainError as exc:
            raise serializers.ValidationError({"alpha": [str(exc)]}) from exc
        if not 0 <= attrs["max_errored_fraction"] <= 1:
            raise serializers.ValidationError({"max_errored_fraction": ["must be in [0, 1]"]})
        return attrs


class GateDecisionOutput(serializers.Serializer):
    exit_code = serializers.IntegerField(
        help_text="0 pass (no significant regression), 1 regression, 2 cannot decide: the "
        "exit code manage.py gate returns for the same runs."
    )
    title = serializers.CharField(
        help_text="The decision in words: 'no significant "
        "regression', 'regression' or 'cannot decide'."
    )
    reasons = serializers.ListField(
        child=serializers.CharField(), help_text="Why, one sentence each."
    )


class GateOutput(serializers.Serializer):
    decision = GateDecisionOutput(help_text="The gate's decision.")
    comparison = serializers.JSONField(
        help_text="The comparison (evals.comparison.compute.Comparison.to_dict): base and head "
        "summaries, alpha, comparability problems, per-case rows, added/removed/"
        "changed cases, change-class counts, headline (rates and delta as "
        "fractions 0..1, p_value and p_text, within-case (bootstrap_low/high) and "
        "clustered intervals), "
        "error counts, usage (USD as decimal strings, tokens, ms), pass^k and pass@k "
        "per k (pass_hat_k[], pass_at_k[]: base, head, delta, each side's base_low/_high and "
        "head_low/_high, and the delta's 95% interval delta_low/_high with delta_method: "
        "'paired' at k = 1 when every shared case with a verdict has one on both sides (the "
        "headline's delta and clustered interval: one quantity, one interval), else 'mover' "
        "(stats.passk.difference_interval)), "
        "detectable drop (fraction)."
    )
    agents = serializers.JSONField(
        allow_null=True,
        help_text="Two stored agent runs (state and trajectory graders): the outcome x "
        "trajectory 2 x 2 over the shared cases, base -> head (evals.comparison.agents."
        "agent_moves_json: n_cases, cells[] with cell, label, base, head, change (trials), "
        "base_in_table, head_in_table, base_share, head_share, share_change; outcome and "
        "trajectory mean per-case rates); null otherwise. It decides nothing.",
    )


def run_or_404(run_uuid) -> Run:
    """The run with this UUID (suite joined); 404 when none or not a UUID (paths take any text so
    permissions are checked first: an outsider gets 403 whatever the path)."""
    run_uuid = uuid_parse(str(run_uuid))
    if run_uuid is None:
        raise NotFound("No run with that UUID.")
    return get_object_or_404(Run.objects.select_related("suite"), uuid=run_uuid)


class TopUpOutput(serializers.Serializer):
    uuid = serializers.UUIDField(help_text="UUID of the top-up.")
    status = serializers.CharField(
        help_text="queued, running, settled, capped (stopped at the cost cap), failed or cancelled."
    )
    head = serializers.UUIDField(help_text="UUID of the head run.")
    base = serializers.UUIDField(help_text="UUID of the base run.")
    rounds_done = serializers.IntegerField(help_text="Rounds of trials added so far.")
    trials_added = serializers.IntegerField(help_text="Trials added so far (both runs).")
    plan = serializers.JSONField(help_text="The design fixed at the start (alpha per look).")
    error = serializers.CharField(help_text="Why it failed (empty otherwise).")
    url = serializers.URLField(help_text="This resource.")
    result = GateOutput(
        allow_null=True, help_text="The gate's decision once it ended (null before)."
    )


def _refuse_blind(user, *sides) -> None:
    """403 for a reviewer to whom a trial of these runs is blind (``evals.blindness``)."""
    runs = [r for r in sides if isinstance(r, Run)]
    if runs and comparison_is_blind(user, *runs):
        raise PermissionDenied(BLIND_COMPARISON)


class GateApi(APIView):
    """POST: the CI gate (``evals.comparison.gate.gate_evaluate``) on two runs; 200 with exactly the
    JSON ``manage.py gate --json`` prints (``decision.exit_code`` 0 pass, 1 regression,
    2 cannot decide); 400 naming the field for bad input (the command's exit 3); 404 for an
    unknown run."""

    permission_classes = [IsViewer]
    parser_classes = [StrictJSONParser]
    body_limit = "gate"  # 413 past 1 MiB, before parsing (core.bounds.BODY_MAX_BYTES)

    @extend_schema(
        request=GateInput,
        responses={
            200: GateOutput,
            202: OpenApiResponse(
                response=TopUpOutput, description="top_up: started; poll its url."
            ),
            400: OpenApiResponse(description="Bad input; the body names the field."),
            404: OpenApiResponse(description="No run with that UUID."),
        },
    )
    def post(self, request):
        data = GateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            head = (
                run_document_read(v["head_file"], field="head_file")
                if "head_file" in v
                else run_or_404(v["head"])
            )
            base = (
                run_document_read(v["base_file"], field="base_file")
                if "base_file" in v
                else run_or_404(v["base"])
                if "base" in v
                else None
            )
            _refuse_blind(request.user, head, base)
            if v["top_up"]:
                return self._top_up(request, head, base, v)
            policy = {
                "alpha": v["alpha"],
                "max_errored_fraction": v["max_errored_fraction"],
                "allow_untrusted": v["allow_untrusted"],
                "allow_incomparable": v["allow_incomparable"],
            }
            if isinstance(head, Run) and isinstance(base, Run):
                # A settled top-up of this pair decides, as on the page and in the command.
                comparison, decision = comparison_decision(head=head, base=base, **policy)
            else:
                comparison, decision = gate_evaluate(head=head, base=base, **policy)
        except DomainError as exc:
            raise serializers.ValidationError({exc.field or "detail": [str(exc)]}) from exc
        body = gate_json(comparison, decision, agents=agent_moves_for(base=base, head=head))
        return HttpResponse(body, content_type="application/json")

    def _top_up(self, request, head, base, v):
        """202 with the top-up to poll; 200 with the decision on the trials there are when
        no trial can be added (files, imported runs: ``top_up_refused``), as the command."""
        flags = [
            name
            for name, on in (
                ("allow_untrusted", v["allow_untrusted"]),
                ("allow_incomparable", v["allow_incomparable"]),
                ("max_errored_fraction", v["max_errored_fraction"] != 0.0),
            )
            if on
        ]
        if flags:
            raise DomainError(
                f"top_up decides under the default policy: leave out {', '.join(flags)}",
                field="top_up",
            )
        if base is None and isinstance(head, Run):
            current = baseline_current(suite=head.suite)
            if current is None:
                raise DomainError(f"suite {head.suite.name!r} has no baseline", field="base")
            base = current.run
        _, refusal = comparison_plan(base=base, head=head, alpha=v["alpha"])
        if refusal is not None:
            comparison, decision = gate_evaluate(head=head, base=base, alpha=v["alpha"])
            decision = top_up_refused(decision, refusal)
            body = gate_json(comparison, decision, agents=agent_moves_for(base=base, head=head))
            return HttpResponse(body, content_type="application/json")
        top_up = top_up_start(
            base=base,
            head=head,
            alpha=v["alpha"],
            max_trials_per_case=v["max_trials_per_case"],
            max_cost_usd=v["max_cost_usd"],
            by=request.user,
        )
        url = reverse("api:top-up-detail", kwargs={"top_up_id": top_up.uuid})
        return Response(top_up_json(top_up, request), status=202, headers={"Location": url})


def top_up_json(top_up: TopUp, request) -> dict:
    """A top-up as the API shows it; ``result`` is the gate's usual body once it ended."""
    result = None
    if top_up.is_terminal:
        comparison, decision = top_up_result(top_up=top_up)
        agents = agent_moves_for(base=top_up.base, head=top_up.head)
        result = json.loads(gate_json(comparison, decision, agents=agents))
    return {
        "uuid": str(top_up.uuid),
        "status": top_up.status,
        "head": str(top_up.head.uuid),
        "base": str(top_up.base.uuid),
        "rounds_done": top_up.rounds_done,
        "trials_added": top_up.trials_added,
        "plan": top_up.plan,
        "error": top_up.error,
        "url": request.build_absolute_uri(
            reverse("api:top-up-detail", kwargs={"top_up_id": top_up.uuid})
        ),
        "result": result,
    }


class TopUpDetailApi(APIView):
    """GET: a top-up's progress, and the gate's decision once it has ended."""

    permission_classes = [IsViewer]

    @extend_schema(
        responses={200: TopUpOutput, 404: OpenApiResponse(description="No such top-up.")},
        parameters=[
            OpenApiParameter(
                "top_up_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description="UUID of the top-up.",
            )
        ],
    )
    def get(self, request, top_up_id):
        top_up = get_object_or_404(
            TopUp.objects.select_related("head", "base"), uuid=uuid_or_404(top_up_id, "top-up")
        )
        return Response(top_up_json(top_up, request))


# ---- GET /api/comparisons/ ------------------------------------------------------------


def _alpha(request) -> float:
    """``?alpha=``: a plain decimal in [1e-6, 0.5], default 0.05; else a 400 naming alpha."""
    text = request.query_params.get("alpha")
    if text is None:
        return DEFAULT_ALPHA
    if not DECIMAL.fullmatch(text):
        raise serializers.ValidationError(
            {
                "alpha": [
                    f"expected a decimal number from {ALPHA_MIN:g} to {ALPHA_MAX:g} such as 0.05, "
                    f"got {text[:100]!r}"
                ]
            }
        )
    try:
        return alpha_check(float(text))
    except DomainError as exc:
        raise serializers.ValidationError({"alpha": [str(exc)]}) from exc


P_BASE = OpenApiParameter(
    "base",
    OpenApiTypes.UUID,
    OpenApiParameter.QUERY,
    required=True,
    description="UUID of the base run.",
)
P_HEAD = OpenApiParameter(
    "head",
    OpenApiTypes.UUID,
    OpenApiParameter.QUERY,
    required=True,
    description="UUID of the head run.",
)
P_ALPHA = OpenApiParameter(
    "alpha",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="Level of the test, a plain decimal from 0.000001 to 0.5; default 0.05.",
)


class ComparisonApi(APIView):
    """GET ``?base=<uuid>&head=<uuid>[&alpha=0.05]``: the comparison the comparison page
    shows (``comparison_cached_get``) with the gate's decision under the default policy,
    as ``{"decision": {...}, "comparison": {...}}`` (the gate's shape). One document, not a
    paged list: the per-case rows are all in ``comparison.cases``."""

    permission_classes = [IsViewer]

    @extend_schema(
        parameters=[P_BASE, P_HEAD, P_ALPHA],
        responses={
            200: GateOutput,
            400: OpenApiResponse(description="A missing or bad parameter, named."),
            404: OpenApiResponse(description="No run with that UUID."),
        },
    )
    def get(self, request):
        base_id, head_id = (
            query_uuid_required(request, "base"),
            query_uuid_required(request, "head"),
        )
        alpha = _alpha(request)
        base, head = run_or_404(base_id), run_or_404(head_id)
        _refuse_blind(request.user, head, base)
        settled = top_up_settled_get(base=base, head=head, alpha=alpha)
        if settled is not None:  # as on the page: the settled top-up decides
            comparison, decision = top_up_result(top_up=settled)
        else:
            comparison = comparison_cached_get(base=base, head=head, alpha=alpha)
            plan = comparison_plan(base=base, head=head, alpha=alpha)[0]
            decision = gate_decide(comparison, alpha=alpha, plan=plan)
        # The run list's regression flag (kept at the gate's default alpha only).
        verdict_remember(base=base, head=head, verdict=decision.verdict, alpha=alpha)
        agents = agent_moves_for(base=base, head=head)  # as each run's report reads it
        return Response(json.loads(gate_json(comparison, decision, agents=agents)))


# ---- downloads ------------------------------------------------------------------------
