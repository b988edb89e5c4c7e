"""Read-only API resources of evals (suites, cases, runs, trials, grades, baselines) with
their filters, and the actions start a run and set a baseline. Thin: parse, call one
service, render. The gate, comparisons and downloads are in ``evals.api.comparisons``.

Filters are query parameters checked strictly: a UUID parameter that is not a UUID, or a
``?status=`` outside the model's statuses, is a 400 naming it (never a 500 or an empty
page); ``?tag=`` matches a whole tag in the database (``evals.tags``)."""

from __future__ import annotations

import functools

from django.conf import settings
from django.db.models import QuerySet, TextChoices
from django.db.models.functions import Length, Substr
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from core.actors import Via
from core.api.fields import StrictCharField, StrictIntegerField, StrictUUIDField, query_uuid_known
from core.api.permissions import IsRunner, IsViewer
from core.api.rows import field_converter
from core.errors import DomainError
from core.http import uuid_or_404
from evals.baselines import baseline_set
from evals.blindness import (
    NOT_BLIND,
    REPORT_PER_TRIAL_PARTS,
    Blind,
    blind_for,
    grades_visible_to,
    run_is_blind,
)
from evals.grading.contract.decisions import CONTRACT_KIND, decision_history, run_decisions
from evals.grading.recorded import run_grade
from evals.models import Baseline, Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from evals.run_status import STATUS_SHOWN_VALUES, run_status_shown, runs_status_shown_filter
from evals.runner import start as services
from evals.runner.finalize import run_cancel
from evals.runner.retry import run_retry
from evals.runner.start import DEFAULT_TRIALS_PER_CASE, MAX_TRIALS_PER_CASE
from evals.tags import cases_tagged, trials_tagged

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
    suite = serializers.SlugRelatedField(slug_field="uuid", read_only=True, help_text=H["suite"])

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


RUN_FIELDS = [
    "uuid",
    "suite",
    "name",
    "source",
    "status",
    "status_shown",
    "target_kind",
    "model",
    "trials_per_case",
    "trials_total",
    "trials_finished",
    "trials_errored",
    "trials_cancelled",
    "source_version",
    "error_message",
    "created_at",
    "started_at",
    "finished_at",
    "cancelled_via",
]
RUN_HELP = _help(
    RUN_FIELDS,
    name="Run name, unique in its suite.",
    source="executed or imported.",
    status="queued, running, succeeded, failed or cancelled. An imported run's is "
    "succeeded once the import finished (or its run file's): status_shown says what its "
    "trials say.",
    target_kind="Kind of target (simulated, openai, callable, ...).",
    model="Model name.",
    trials_per_case="N, attempts per case.",
    trials_total="Trials planned (count): cases × trials per case, plus top-ups; an "
    "imported run's, what its source recorded, or planned when it says so (more than "
    "trials_finished + trials_cancelled: partial). With "
    "trials_finished, the finished/planned figure every page shows (evals.run_status."
    "run_trial_count).",
    trials_finished="Trials finished, ok or errored (count); a retried trial's errored "
    "attempt is history, not counted.",
    trials_errored='Trials errored, of trials_finished (count): "N of M trials errored" '
    "takes M = trials_finished everywhere.",
    trials_cancelled="Trials cancelled before they ran (count): not finished, not errored, "
    'not pending, never graded; shown apart ("K cancelled").',
    source_version="Version label of the system under test.",
    error_message="Why the run failed (empty otherwise).",
    started_at="Start time (ISO 8601, UTC).",
    finished_at="End time (ISO 8601, UTC).",
    cancelled_via="Where the cancel came from: page, api, command or system; empty while "
    "not cancelled (and for a run cancelled before it was recorded).",
)


class RunStatusShownSerializer(serializers.Serializer):
    key = serializers.CharField(
        help_text="The badge: a status (an executed run), imported, or imported-problems."
    )
    label = serializers.CharField(help_text="The badge's text: the status, or imported.")
    problems = serializers.ListField(
        child=serializers.CharField(),
        help_text='What is wrong, for people ("3 of 60 trials errored", "partial: 58 of 60 '
        'trials recorded"); empty when nothing is.',
    )
    errored = serializers.IntegerField(help_text="Errored trials (count).")
    partial = serializers.BooleanField(
        help_text="Fewer trials recorded (finished or cancelled) than the source planned."
    )


class RunSerializer(serializers.ModelSerializer):
    suite = serializers.SlugRelatedField(slug_field="uuid", read_only=True, help_text=H["suite"])
    cancelled_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        help_text="Username of who cancelled the run; null when not cancelled, or cancelled "
        "with no user (from the command line, by the system: ``cancelled_via``).",
    )
    cancelled = serializers.CharField(
        source="cancelled_text",
        read_only=True,
        help_text='Who cancelled the run, as the page says it ("by carol", "from the command '
        'line", "by the system"); empty while not cancelled.',
    )
    status_shown = serializers.SerializerMethodField(
        help_text="The status every page shows (evals.run_status): an imported run shows "
        "imported, with its errored trials and whether it is partial, never succeeded."
    )

    @extend_schema_field(RunStatusShownSerializer)
    def get_status_shown(self, run) -> dict:
        return run_status_shown(run).as_json()

    class Meta:
        model = Run
        fields = [*RUN_FIELDS, "cancelled_by", "cancelled"]
        extra_kwargs = RUN_HELP


class RunStartedSerializer(RunSerializer):
    warning = serializers.SerializerMethodField(
        help_text="Present when some of the run's task messages wait for an unreachable "
        "broker: the run is saved and starts by itself once the broker is back."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "warning"]

    def get_warning(self, run) -> str:
        return services.run_publish_warning(run=run)


def _started(run: Run, status: int) -> Response:
    """The answer to a start or a retry: the run, with ``warning`` only when its task
    messages wait for the broker."""
    data = RunStartedSerializer(run).data
    if not data["warning"]:
        del data["warning"]
    return Response(data, status=status)


class RunDetailSerializer(RunSerializer):
    report = serializers.SerializerMethodField(
        help_text="The run report (evals.report.selectors.run_report): counts, pass rate with its "
        "95% interval (fractions 0..1), pass@k and pass^k with their 95% intervals "
        "(pass_k[].pass_at_k_low/_high, pass_hat_k_low/_high), mean score with its interval "
        "(score_interval), tokens, latency (ms), cost (USD)."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "target", "graders", "report"]
        extra_kwargs = {
            **RUN_HELP,
            "target": {"help_text": "Target configuration snapshot."},
            "graders": {"help_text": "Grader set: list of {key, kind, config, gating}."},
        }

    def get_report(self, run) -> dict:
        data = run_report(run=run).to_dict()
        request = self.context.get("request")
        if request is not None and run_is_blind(request.user, run):
            # A reviewer still labeling some of the run's trials: no per-case rows, slices
            # or reasons, which would show those trials' judge verdicts or gold labels.
            data.update(dict.fromkeys(REPORT_PER_TRIAL_PARTS))
            data["blind"] = True
        return data


TRIAL_FIELDS = [
    "uuid",
    "run",
    "case",
    "attempt",
    "status",
    "error_message",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "created_at",
]
TRIAL_HELP = _help(
    TRIAL_FIELDS,
    attempt="Attempt number 1..N.",
    status="queued, running, ok, error or cancelled.",
    error_message="Why the trial errored.",
    latency_ms="Wall-clock latency of the target call (ms).",
    input_tokens="Prompt tokens (null: unknown).",
    output_tokens="Completion tokens (null: unknown).",
    cost_usd="Cost in USD (string, exact; null: price unknown).",
)


class TrialSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(source="run.uuid", read_only=True, help_text=H["run"])
    case = serializers.UUIDField(source="case.uuid", read_only=True, help_text=H["case"])
    output_preview = serializers.CharField(
        read_only=True, help_text="First 2,000 characters of the output."
    )
    output_length = serializers.IntegerField(
        read_only=True, help_text="Length of the whole output (characters)."
    )
    decision = serializers.SerializerMethodField(
        help_text="The contract decision of the trial: rejected, review (every deterministic "
        "check passed; not accepted), accepted, errored, not_graded or infrastructure_error; "
        "null when its run has no contract grader or the attempt was retried, and for a "
        "reviewer while its case shares its input with an item they still have to label."
    )

    class Meta:
        model = Trial
        fields = [*TRIAL_FIELDS, "output_preview", "output_length", "decision"]
        extra_kwargs = TRIAL_HELP

    def get_decision(self, trial: Trial) -> str | None:
        if "blind" not in self.context:
            request = self.context.get("request")
            self.context["blind"] = blind_for(request.user) if request else NOT_BLIND
        if self.context["blind"].holds(trial.case):
            return None  # a decision is a verdict (evals.blindness)
        # One read of the run's decisions per run per response (the serializer context).
        cache = self.context.setdefault("run_decisions", {})
        if trial.run_id not in cache:
            cache[trial.run_id] = run_decisions(run=trial.run)
        found = cache[trial.run_id].trials.get(trial.id)
        return found.decision if found else None


# Where a list row keeps each field of ``TrialSerializer`` (by default under its own name).
TRIAL_ROW_KEYS = {"run": "run__uuid", "case": "case__uuid", "decision": None}
TRIAL_LIST_COLUMNS = (
    "id",
    "run_id",
    "run__uuid",
    "case__uuid",
    *(f for f in TRIAL_FIELDS if f not in TRIAL_ROW_KEYS),
    "output_preview",
    "output_length",
    "case__input_hash",  # blindness (evals.blindness): a blind trial shows no decision
)


@functools.cache
def _trial_list_fields() -> tuple[serializers.Field, ...]:
    """``TrialSerializer``'s readable fields, built once per process (DRF builds a model
    serializer's fields again for every serializer made). Only read, never bound again."""
    return tuple(TrialSerializer()._readable_fields)


def trial_rows_data(
    rows: list[dict], *, runs: dict[int, Run], blind: Blind = NOT_BLIND
) -> list[dict]:
    """The JSON of a list page's trials: each row (a dict of ``TRIAL_LIST_COLUMNS``, no model
    instance, no run or case row loaded) through ``TrialSerializer``'s own fields'
    representations (``core.api.rows``: the same output as DRF's; None stays None), with
    each row's contract decision from its run in ``runs`` (``run_decisions``, read once per
    run) but None on a row blind for the reader (``blind``: its ``case__input_hash`` in
    ``blind.groups``). A page of 100 trials through DRF's per-attribute path was ~half its
    server time; a test checks every row against ``TrialSerializer`` on the model."""
    plan = []  # (name, converter, row key; None: the decision), in field order
    for f in _trial_list_fields():
        key = TRIAL_ROW_KEYS.get(f.field_name, f.field_name)
        plan.append((f.field_name, None if key is None else field_converter(f), key))
    decisions: dict[int, dict] = {}
    out = []
    for row in rows:
        item = {}
        for name, convert, key in plan:
            if key is None:
                if row["case__input_hash"] in blind.groups:
                    item[name] = None
                    continue
                run_id = row["run_id"]
                if run_id not in decisions:
                    decisions[run_id] = run_decisions(run=runs[run_id]).trials
                found = decisions[run_id].get(row["id"])
                item[name] = found.decision if found else None
                continue
            value = row[key]
            item[name] = None if value is None else convert(value)
        out.append(item)
    return out


class TrialDetailSerializer(TrialSerializer):
    decision_history = serializers.SerializerMethodField(
        help_text="The moves of the contract decision caused by label changes, oldest first: "
        "{from, to, reviewer, label_version, cause (created, revised, undo), at}; empty when "
        "none (and for a reviewer while the decision is hidden from them)."
    )
    goal_state = serializers.JSONField(
        source="case.goal_state",
        read_only=True,
        help_text="The case's goal state (an agent case's wanted final state; null for none).",
    )

    class Meta(TrialSerializer.Meta):
        fields = [
            *TRIAL_FIELDS,
            "output",
            "output_length",
            "decision",
            "decision_history",
            "request",
            "trajectory",
            "final_state",
            "goal_state",
        ]
        extra_kwargs = {
            **TRIAL_HELP,
            "output": {"help_text": "The whole output (text)."},
            "trajectory": {
                "help_text": "An agent trial's ordered steps (message, tool_call, tool_result; "
                "tokens, latency_ms and cost_usd per step where known; docs/agents.md); "
                "null for a trial that has none."
            },
            "final_state": {
                "help_text": "The world's state when the agent stopped (any JSON); null when none."
            },
            "request": {
                "help_text": "The exact request the target sent (an OpenAI-compatible target: "
                "the JSON body with model, messages as rendered and generation settings); "
                "null when the target sent none of its own."
            },
        }

    def get_decision_history(self, trial: Trial) -> list[dict]:
        if self.get_decision(trial) is None:
            return []
        return [
            {
                "from": t.from_decision,
                "to": t.to_decision,
                "reviewer": t.reviewer_name,
                "label_version": t.label_version,
                "cause": t.cause,
                "at": t.created_at.isoformat(),
            }
            for t in decision_history(trial_ids=[trial.id]).get(trial.id, [])
        ]


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


# What each UUID filter of the lists names: a UUID naming none of these is a 404.
FILTER_ROWS = {"suite": (Suite, "suite"), "run": (Run, "run"), "case": (Case, "case")}


def _by_uuid(request, qs: QuerySet, **params: str) -> QuerySet:
    """``qs`` filtered by the UUID query parameters named in ``params`` (param -> lookup):
    a malformed value is a 400 and a UUID naming no suite, run or case a 404 on the
    parameter ("suite: no suite with id ..."; ``core.api.fields.query_uuid_known``)."""
    for param, lookup in params.items():
        model, noun = FILTER_ROWS[param]
        value = query_uuid_known(request, param, model.objects.all(), noun)
        if value is not None:
            qs = qs.filter(**{lookup: value})
    return qs


def _by_status(request, qs: QuerySet, statuses: type[TextChoices]) -> QuerySet:
    """``qs`` filtered by ``?status=``; an unknown value is a 400 listing the allowed ones
    (never an empty page)."""
    value = request.query_params.get("status")
    if not value:
        return qs
    if value not in statuses.values:
        raise serializers.ValidationError(
            {"status": [f"unknown status {value[:100]!r}; allowed: {', '.join(statuses.values)}"]}
        )
    return qs.filter(status=value)


def _tag(request) -> str | None:
    """``?tag=`` (None when absent or empty): one whole tag, matched exactly
    (``evals.tags``). A NUL character never gets here: a 400 for every query parameter
    (``core.api.checks``)."""
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


P_RUN_STATUS = _param(
    "status",
    "Only runs whose status_shown.label is this (the badge's status: an imported run is "
    "'imported', never 'succeeded'); any other value is a 400.",
    enum=list(STATUS_SHOWN_VALUES),
)


@extend_schema_view(list=extend_schema(parameters=[P_SUITE, P_RUN_STATUS]), **_detail("run"))
class RunViewSet(ViewerViewSet):
    """Runs; ``?suite=<uuid>``, ``?status=`` (the status the run's badge shows,
    ``status_shown.label``: ``imported`` or a run status). The detail holds the run report."""

    def get_queryset(self):
        qs = _by_uuid(
            self.request,
            Run.objects.select_related("suite", "cancelled_by"),
            suite="suite__uuid",
        )
        value = self.request.query_params.get("status")
        if not value:
            return qs
        if value not in STATUS_SHOWN_VALUES:
            raise serializers.ValidationError(
                {
                    "status": [
                        f"unknown status {value[:100]!r}; allowed: {', '.join(STATUS_SHOWN_VALUES)}"
                    ]
                }
            )
        return runs_status_shown_filter(qs, status=value)

    def get_serializer_class(self):
        return RunDetailSerializer if self.action == "retrieve" else RunSerializer


@extend_schema_view(
    list=extend_schema(parameters=[P_RUN, P_CASE, P_SUITE, P_TAG, _status(Trial.Status)]),
    **_detail("trial"),
)
class TrialViewSet(ViewerViewSet):
    """Trials; ``?run=<uuid>``, ``?case=<uuid>``, ``?suite=<uuid>``, ``?tag=`` (the case's
    tag), ``?status=``. Lists hold an output preview (first 2,000 characters, cut in the
    database) and the full length; the detail holds the output. No grade or label is
    included (they are ``/api/grades/`` and ``/api/labels/``, filtered by
    ``evals.blindness``), so a reviewer reads no verdict here. The detail also holds an agent
    trial's ``trajectory``, ``final_state`` and its case's ``goal_state`` (lists do not load
    them)."""

    def get_queryset(self):
        if self.action == "list":
            qs = Trial.objects.annotate(
                output_preview=Substr("output", 1, settings.ASSAY["OUTPUT_PREVIEW_CHARS"]),
                output_length=Length("output"),
            )
        else:
            qs = Trial.objects.select_related("run", "case").annotate(
                output_length=Length("output")
            )
        qs = _by_uuid(
            self.request, qs, run="run__uuid", case="case__uuid", suite="run__suite__uuid"
        )
        tag = _tag(self.request)
        if tag is not None:
            qs = trials_tagged(qs, tag)
        qs = _by_status(self.request, qs, Trial.Status)
        # A list reads rows, not models: the listed columns only, no run or case row.
        return qs.values(*TRIAL_LIST_COLUMNS) if self.action == "list" else qs

    def list(self, request, *args, **kwargs):
        """A page of trials: three queries whatever the number of trials (the user with
        their roles, by token or session; the page; its runs), plus the contract decisions
        of a run that has a contract grader (and then the reader's blind groups)."""
        page = self.paginate_queryset(self.get_queryset())
        runs = Run.objects.only("id", "graders").in_bulk({row["run_id"] for row in page})
        contract = any(
            s.kind == CONTRACT_KIND for run in runs.values() for s in run.grader_set.specs
        )
        blind = blind_for(request.user) if contract else NOT_BLIND  # only decisions are hidden
        return self.get_paginated_response(trial_rows_data(page, runs=runs, blind=blind))

    def get_serializer_class(self):
        return TrialDetailSerializer if self.action == "retrieve" else TrialSerializer


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


@extend_schema_view(list=extend_schema(parameters=[P_SUITE]), **_detail("baseline row", by_id=True))
class BaselineViewSet(ViewerViewSet):
    """Baselines (history, oldest first); ``?suite=<uuid>``. Looked up by id."""

    lookup_field = "pk"
    serializer_class = BaselineSerializer

    def get_queryset(self):
        qs = Baseline.objects.select_related("suite", "run")
        return _by_uuid(self.request, qs, suite="suite__uuid")


class RunStartInput(serializers.Serializer):
    suite = StrictUUIDField(help_text=H["suite"])
    name = StrictCharField(max_length=200, help_text="Run name, unique in its suite.")
    target = serializers.JSONField(
        help_text="Target configuration ({kind, ...}). An openai target's prompt_template "
        "fills $input, $expected, $context, $key, $tags and $attempt (also ${input}; $$ is a "
        "literal $; braces are plain text) and must use one of $input, $expected, $context, "
        "$key; {input} is refused. Its api_key_env is the name of the environment variable "
        "holding the endpoint's key on the workers (default OPENAI_API_KEY; it must match "
        "[A-Z][A-Z0-9_]*_API_KEY), or null for an endpoint that takes no key (no "
        "Authorization header); a value that looks like a key (sk-...) is refused naming "
        "target.api_key_env. Retries and top-ups use the same variable, or none."
    )
    graders = serializers.JSONField(
        help_text="Grader set: list of {key, kind, config}. A judge grader's config names its "
        "version by judge_version (a UUID, JUDGE:vN or a judge name) or by judge and "
        "judge_number (a name and a version number; beside a UUID, the fallback when the UUID "
        "is not known here, as run files write it)."
    )
    trials_per_case = StrictIntegerField(
        min_value=1,
        max_value=MAX_TRIALS_PER_CASE,
        required=False,
        default=DEFAULT_TRIALS_PER_CASE,
        help_text=f"N, attempts per case (1..{MAX_TRIALS_PER_CASE}; default "
        f"{DEFAULT_TRIALS_PER_CASE}, as on the form and the command line).",
    )
    source_version = StrictCharField(
        required=False, default="", allow_blank=True, help_text="Version label of the system."
    )
    against = StrictUUIDField(
        required=False,
        default=None,
        allow_null=True,
        help_text="An adaptive run: UUID of a succeeded run of the suite (the baseline). After "
        "N trials per case, more trials go only to cases whose comparison with it is still "
        "uncertain, until the gate's answer cannot change or 4N is reached.",
    )


class RunStartApi(APIView):
    """POST: start a run (``evals.runner.start.run_start``); 201 with the run, 400 naming the
    field on bad input; 413 for a body over 256 KiB (``core.bounds.BODY_MAX_BYTES``)."""

    permission_classes = [IsRunner]
    body_limit = "run_start"

    @extend_schema(request=RunStartInput, responses={201: RunStartedSerializer})
    def post(self, request):
        data = RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        # An unknown suite or baseline is a 404 naming the field (core.api.errors).
        suite = _named(Suite.objects.all(), v["suite"], field="suite")
        against = _named(Run.objects.all(), v["against"], field="against", noun="run")
        # A refused run is a DomainError: a 400 naming its field (core.api.errors).
        run = services.run_start(
            suite=suite,
            name=v["name"],
            target=v["target"],
            graders=v["graders"],
            trials_per_case=v["trials_per_case"],
            source_version=v["source_version"],
            started_by=request.user,
            against=against,
        )
        return _started(run, 201)


def _named(rows: QuerySet, value, *, field: str, noun: str = ""):
    """The row of ``rows`` with UUID ``value`` (None for None); ``DomainError`` naming
    ``field`` with code ``not_found`` (a 404) when there is none."""
    if value is None:
        return None
    row = rows.filter(uuid=value).first()
    if row is None:
        raise DomainError(f"no {noun or field} with id {value}", field=field, code="not_found")
    return row


class BaselineSetInput(serializers.Serializer):
    run = StrictUUIDField(help_text="UUID of the finished run to make the baseline.")
    note = StrictCharField(
        max_length=500,
        required=False,
        default="",
        allow_blank=True,
        help_text="Why (at most 500 characters).",
    )


class RunRetryApi(APIView):
    """POST: retry the run's errored trials (``evals.runner.retry.run_retry``); 202 with the
    run (poll it), and a ``warning`` when the broker is unreachable; the errored attempts stay
    as history. 400 when none is left to retry."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=None,
        responses={202: RunStartedSerializer},
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
        run_retry(run=run, by=request.user)
        run.refresh_from_db()
        return _started(run, 202)


class RunCancelApi(APIView):
    """POST: cancel a queued or running run (``evals.runner.finalize.run_cancel``): workers
    start no further call; calls in flight finish and are recorded. Engineers and leads. 200
    with the run (cancelling a cancelled one again is a 200 that changes nothing); 409 when
    it has already succeeded or failed; 404 for an unknown run."""

    permission_classes = [IsRunner]

    @extend_schema(
        request=None,
        responses={
            200: RunSerializer,
            404: OpenApiResponse(description="No such run."),
            409: OpenApiResponse(description="It has already succeeded or failed."),
        },
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
        run_cancel(run=run, by=request.user, via=Via.API, refuse_finished=True)
        return Response(RunSerializer(run).data, status=200)


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
