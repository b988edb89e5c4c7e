"""Runs, read-only: the list with its filters, and the detail with the run report."""

from __future__ import annotations

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers

from evals.api.runs._common import P_SUITE, H, ViewerViewSet, _by_uuid, _detail, _help, _param
from evals.blindness import REPORT_BLIND_PARTS, run_is_blind
from evals.models import Run, Suite
from evals.report.selectors import run_report
from evals.run_status import STATUS_SHOWN_VALUES, run_status_shown, runs_status_shown_filter
from evals.target_shown import target_shown

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
    # DRF's metaclass takes a declared field off the class; its stubs see Field.label here.
    label = serializers.CharField(  # type: ignore[assignment]
        help_text="The badge's text: the status, or imported."
    )
    problems = serializers.ListField(
        child=serializers.CharField(),
        help_text='What is wrong, for people ("3 of 60 trials errored", "partial: 58 of 60 '
        'trials recorded"); empty when nothing is.',
    )
    errored = serializers.IntegerField(help_text="Errored trials (count).")
    # DRF's metaclass takes a declared field off the class; its stubs see
    # BaseSerializer.partial here.
    partial = serializers.BooleanField(  # type: ignore[assignment]
        help_text="Fewer trials recorded (finished or cancelled) than the source planned."
    )


class RunSerializer(serializers.ModelSerializer):
    suite: serializers.SlugRelatedField[Suite] = serializers.SlugRelatedField(
        slug_field="uuid", read_only=True, help_text=H["suite"]
    )
    cancelled_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
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


class TargetRowSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The setting, dotted when nested (settings.temperature).")
    title = serializers.CharField(help_text="Its label on the run page.")
    value = serializers.CharField(
        help_text="Its value as text (JSON for numbers, lists, objects); any value that looks "
        "like a key, and a base_url's user and password, masked (evals.target_shown)."
    )


class RunDetailSerializer(RunSerializer):
    target_shown = serializers.SerializerMethodField(
        help_text="The target as the run page shows it, one row per setting, secrets masked."
    )
    report = serializers.SerializerMethodField(
        help_text="The run report (evals.report.selectors.run_report): counts, pass rate with its "
        "95% interval (fractions 0..1), pass@k and pass^k with their 95% intervals "
        "(pass_k[].pass_at_k_low/_high, pass_hat_k_low/_high), mean score with its interval "
        "(score_interval), tokens, latency (ms), cost (USD)."
    )

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "target", "target_shown", "graders", "report"]
        extra_kwargs = {
            **RUN_HELP,
            "target": {"help_text": "Target configuration snapshot."},
            "graders": {"help_text": "Grader set: list of {key, kind, config, gating}."},
        }

    @extend_schema_field(TargetRowSerializer(many=True))
    def get_target_shown(self, run) -> list[dict]:
        return [
            {"key": r.key, "title": r.label, "value": r.value} for r in target_shown(run.target)
        ]

    def get_report(self, run) -> dict:
        data = run_report(run=run).to_dict()
        request = self.context.get("request")
        if request is not None and run_is_blind(request.user, run):
            # A reviewer still labeling some of the run's trials: no per-case rows, slices,
            # reasons, nor any total of verdicts (the hidden ones by subtraction).
            data.update(dict.fromkeys(REPORT_BLIND_PARTS))
            data["blind"] = True
        return data


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
