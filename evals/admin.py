"""Admin for evals: browse suites, cases, runs, trials and grades; edit the price table.

Big foreign keys use ``raw_id_fields`` (no 100k-row dropdowns) and lists join what they
display (``list_select_related``). Full outputs are not loaded in change lists.
"""

from django import forms
from django.contrib import admin
from django.core.validators import ProhibitNullCharactersValidator

from core.admin import RecordAdmin, ViewOnly
from core.errors import DomainError
from evals.case_changes import case_edit
from evals.cases import CaseSpec, case_spec_check
from evals.models import (
    Baseline,
    Case,
    CaseChange,
    DecisionTransition,
    Experiment,
    ExperimentVariant,
    Grade,
    GraderSetPreset,
    Graduation,
    IngestKey,
    Run,
    RunPrune,
    RunReprice,
    RunSummary,
    Suite,
    TargetPreset,
    TopUp,
    Trial,
    TrialPair,
)


class CaseInline(admin.TabularInline):
    model = Case
    fields = ("key", "tags", "content_hash", "retired_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # cases are frozen; they are created by imports and services


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "description")
    # Trust thresholds change what a judge needs to be trusted: not an admin edit.
    readonly_fields = ("uuid", "created_at", "trust_thresholds")
    inlines = [CaseInline]


class CaseAdminForm(forms.ModelForm):
    """Checks a case's content by ``evals.cases.case_spec_check``, the rule of every path."""

    class Meta:
        model = Case
        fields = ["suite", "key", "input", "expected", "context", "tags", "goal_state"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Django's own NUL check would answer in other words; the rule below says it once.
        for field in self.fields.values():
            field.validators = [
                v for v in field.validators if not isinstance(v, ProhibitNullCharactersValidator)
            ]

    def clean(self):
        data = super().clean()
        instance = self.instance
        spec = CaseSpec(
            key=data.get("key", instance.key),
            input=data.get("input", instance.input),
            expected=data.get("expected", instance.expected),
            context=data.get("context", instance.context) or [],
            tags=data.get("tags", instance.tags) or [],
            goal_state=data.get("goal_state", instance.goal_state),
        )
        try:
            case_spec_check(spec)
        except DomainError as exc:
            name = exc.field.split(".")[0].split("[")[0]
            self.add_error(name if name in self.fields else None, str(exc))
        return data


@admin.register(Case)
class CaseAdmin(admin.ModelAdmin):
    form = CaseAdminForm
    list_display = ("key", "suite", "created_at", "retired_at")
    list_filter = ("suite", ("retired_at", admin.EmptyFieldListFilter))
    search_fields = ("key", "suite__name", "content_hash")
    list_select_related = ("suite",)
    raw_id_fields = ("suite",)
    readonly_fields = ("uuid", "content_hash", "created_at", "retired_at", "replaced_by")

    def has_add_permission(self, request) -> bool:
        return False  # new cases: the dashboard's case editor, imports and config files

    def get_readonly_fields(self, request, obj=None):
        frozen = ("suite", "key") if obj is not None else ()
        retired = (
            ("input", "expected", "context", "tags", "goal_state") if obj and obj.retired_at else ()
        )
        return (*self.readonly_fields, *frozen, *retired)

    def save_model(self, request, obj, form, change):
        """Cases are frozen: an edit goes through ``evals.case_changes.case_edit`` (via "admin"), so
        new content replaces the case and new tags alone are saved in place."""
        stored = Case.objects.filter(pk=obj.pk).first()
        if not change or stored is None or stored.retired_at is not None:
            return
        spec = CaseSpec(
            key=stored.key,
            input=obj.input,
            expected=obj.expected,
            context=obj.context or [],
            tags=obj.tags or [],
            goal_state=obj.goal_state,
        )
        new = case_edit(case=stored, spec=spec, by=request.user, via="admin").case
        obj.pk, obj.id = new.pk, new.id


@admin.register(CaseChange)
class CaseChangeAdmin(admin.ModelAdmin):
    """Read-only: the golden set's history (``evals.cases``, ``evals.case_changes``)."""

    list_display = ("at", "suite", "case", "action", "via", "by")
    list_filter = ("action", "via", "suite")
    list_select_related = ("suite", "case", "by")
    search_fields = ("case__key",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ViewOnly, admin.ModelAdmin):
    list_display = (
        "name",
        "suite",
        "status",
        "source",
        "target_kind",
        "model",
        "trials_finished",
        "trials_total",
        "trials_errored",
        "started_by",
        "created_at",
    )
    list_filter = ("status", "source", "target_kind", "suite")
    search_fields = ("name", "model", "source_version", "suite__name")
    list_select_related = ("suite", "started_by")
    raw_id_fields = ("suite", "started_by")
    readonly_fields = ("uuid", "created_at", "started_at", "finished_at")
    date_hierarchy = "created_at"


@admin.register(Trial)
class TrialAdmin(ViewOnly, admin.ModelAdmin):
    list_display = (
        "id",
        "run",
        "case",
        "attempt",
        "status",
        "latency_ms",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "created_at",
    )
    list_filter = ("status", "run__suite")
    search_fields = ("uuid", "run__name", "case__key", "error_message")
    list_select_related = ("run__suite", "case")
    raw_id_fields = ("run", "case")
    readonly_fields = ("uuid",)

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        # The change list never needs the (possibly huge) output; the change form does.
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("output", "raw_response")
        return qs


@admin.register(Grade)
class GradeAdmin(RecordAdmin):
    """View only: a grade is a grader's verdict of record, written by the runner and judge rung."""

    list_display = ("id", "trial", "grader", "status", "passed", "score", "gating", "created_at")
    list_filter = ("status", "passed", "gating", "grader")
    search_fields = ("grader", "reason")
    list_select_related = ("trial", "judge_version__judge")
    raw_id_fields = ("trial", "judge_version")


@admin.register(DecisionTransition)
class DecisionTransitionAdmin(RecordAdmin):
    """View only: contract decision history, written with the label change that moved each."""

    list_display = ("created_at", "trial", "from_decision", "to_decision", "reviewer_name")
    list_filter = ("to_decision", "cause")
    list_select_related = ("trial",)
    raw_id_fields = ("trial", "reviewer")


@admin.register(RunReprice)
class RunRepriceAdmin(RecordAdmin):
    """View only: a re-pricing of a run (``evals.reprice``), written by ``reprice_run``."""

    list_display = ("created_at", "run", "by", "via", "old_usd", "new_usd", "trials_changed")
    search_fields = ("run__name", "run__uuid")
    list_select_related = ("run", "by")
    raw_id_fields = ("run", "by")


@admin.register(RunPrune)
class RunPruneAdmin(RecordAdmin):
    """View only: a run deleted by ``runs_prune`` (``evals.prune``); outlives the run."""

    list_display = (
        *("started_at", "run_name", "run_uuid", "suite", "by", "via"),
        *("trials", "grades", "batches", "finished_at"),
    )
    search_fields = ("run_name", "run_uuid", "suite__name")
    list_select_related = ("suite", "by")
    raw_id_fields = ("run", "suite", "by")


@admin.register(RunSummary)
class RunSummaryAdmin(ViewOnly, admin.ModelAdmin):
    """Read-only: derived from its run and recomputed when its key changes (``summary``)."""

    list_display = ("run", "key", "computed_at")
    search_fields = ("run__name", "run__uuid")
    list_select_related = ("run",)
    readonly_fields = ("run", "key", "body", "detectable", "computed_at")


@admin.register(TrialPair)
class TrialPairAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ("uuid", "case", "trial_a", "trial_b", "created_at")
    search_fields = ("uuid", "case__key")
    list_select_related = ("case", "trial_a", "trial_b")
    raw_id_fields = ("case", "trial_a", "trial_b")


@admin.register(Baseline)
class BaselineAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ("suite", "run", "set_by", "set_at", "note")
    list_filter = ("suite",)
    list_select_related = ("suite", "run", "set_by")
    raw_id_fields = ("suite", "run", "set_by")


@admin.register(Graduation)
class GraduationAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ("case", "regression_case", "by", "at")
    list_select_related = ("case", "regression_case", "by")
    raw_id_fields = ("case", "regression_case", "by")


class _PresetAdmin(admin.ModelAdmin):
    """Presets are written by ``apply_config`` (which validates them); read-only here."""

    list_display = ("name", "content_hash", "created_at", "updated_at")
    search_fields = ("name",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(TargetPreset)
class TargetPresetAdmin(_PresetAdmin):
    pass


@admin.register(GraderSetPreset)
class GraderSetPresetAdmin(_PresetAdmin):
    pass


@admin.register(IngestKey)
class IngestKeyAdmin(admin.ModelAdmin):
    """Read-only: a key is written by ``POST /api/ingest`` with the response it replays."""

    list_display = ("key", "user", "run", "status_code", "created_at")
    list_select_related = ("user", "run")
    search_fields = ("key",)
    raw_id_fields = ("user", "run")
    readonly_fields = ("key", "user", "body_sha256", "run", "status_code", "response", "created_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(TopUp)
class TopUpAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ("uuid", "head", "base", "status", "rounds_done", "trials_added", "created_at")
    list_filter = ("status", "adaptive")
    list_select_related = ("head__suite", "base__suite")
    raw_id_fields = ("head", "base", "started_by")
    # Trials are added by the top-up itself, never by editing a row.
    readonly_fields = ("plan", "decision", "rounds_done", "trials_added", "finished_at")


@admin.register(Experiment)
class ExperimentAdmin(ViewOnly, admin.ModelAdmin):
    # Experiments are started by evals.experiments.start (its runs and seeds with them) and
    # settled by evals.experiments.racing; never edited as rows.
    list_display = ("uuid", "suite", "name", "metric", "alpha", "trials_per_case", "created_at")
    list_filter = ("metric",)
    list_select_related = ("suite",)
    raw_id_fields = ("suite", "started_by")
    search_fields = ("name",)


@admin.register(ExperimentVariant)
class ExperimentVariantAdmin(ViewOnly, admin.ModelAdmin):
    list_display = ("experiment", "position", "label", "run")
    list_select_related = ("experiment__suite", "run__suite")
    raw_id_fields = ("experiment", "run")
