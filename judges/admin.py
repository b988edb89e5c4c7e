"""Admin for judges: judges, their immutable versions, and pairwise verdicts."""

from django.contrib import admin

from core.admin import RecordAdmin, ViewOnly
from judges.models import (
    DevelopmentLabel,
    Judge,
    JudgeApproval,
    JudgeCallRecord,
    JudgeClaim,
    JudgeRun,
    JudgeVersion,
    PairwiseVerdict,
    ProbeRun,
)


class JudgeVersionInline(admin.TabularInline):
    model = JudgeVersion
    fields = ("number", "model", "protocol", "content_hash")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Judge)
class JudgeAdmin(RecordAdmin):
    list_display = ("name", "kind", "created_at")
    list_filter = ("kind",)
    search_fields = ("name",)
    inlines = [JudgeVersionInline]


@admin.register(JudgeVersion)
class JudgeVersionAdmin(RecordAdmin):
    list_display = ("__str__", "judge", "number", "model", "protocol", "trusted", "created_at")
    list_filter = ("judge",)
    search_fields = ("judge__name", "model", "protocol", "content_hash")
    list_select_related = ("judge",)
    raw_id_fields = ("judge",)
    # View only: a version is immutable (any change is a new version, through
    # judges.versions.judge_version_create, which checks its config and endpoint), and trust
    # is granted by a lead through calibration approval, never by editing a row.
    readonly_fields = ("uuid", "content_hash", "created_at")

    def get_queryset(self, request):
        return super().get_queryset(request).with_trust()

    @admin.display(boolean=True, description="trusted")
    def trusted(self, obj: JudgeVersion) -> bool:
        return obj.is_trusted


@admin.register(PairwiseVerdict)
class PairwiseVerdictAdmin(RecordAdmin):
    list_display = (
        "id",
        "pair",
        "judge_version",
        "position",
        "status",
        "preferred",
        "score",
        "created_at",
    )
    list_filter = ("status", "position", "preferred")
    search_fields = ("reason", "judge_version__judge__name")
    list_select_related = ("pair", "judge_version__judge")
    raw_id_fields = ("pair", "judge_version")


@admin.register(JudgeRun)
class JudgeRunAdmin(ViewOnly, admin.ModelAdmin):
    list_display = (
        "__str__",
        "status",
        "trials_total",
        "trials_graded",
        "trials_errored",
        "created_at",
    )
    list_filter = ("status",)
    list_select_related = ("judge_version__judge", "run")
    raw_id_fields = ("run", "judge_version", "started_by")
    readonly_fields = (
        "uuid",
        "trials_total",
        "trials_graded",
        "trials_errored",
        "created_at",
        "finished_at",
    )


@admin.register(ProbeRun)
class ProbeRunAdmin(ViewOnly, admin.ModelAdmin):
    list_display = (
        "__str__",
        "status",
        "probes_total",
        "judged",
        "fooled",
        "errored",
        "created_at",
    )
    list_filter = ("status",)
    list_select_related = ("judge_version__judge",)
    raw_id_fields = ("judge_version", "started_by")
    readonly_fields = (
        "probes_total",
        "judged",
        "fooled",
        "errored",
        "results",
        "error",
        "created_at",
        "finished_at",
    )


@admin.register(JudgeApproval)
class JudgeApprovalAdmin(RecordAdmin):
    """View only: trust is granted and revoked by a lead through
    ``labeling.approval.judge_trust_approve`` (which checks the calibration rule) and
    ``judges.trust.trust_revoke``; a row added here would be trust no rule allowed."""

    list_display = ("judge_version", "approved_by", "approved_at", "revoked_at", "revoked_by")
    list_select_related = ("judge_version__judge", "approved_by", "revoked_by")
    raw_id_fields = ("judge_version", "calibration_set", "approved_by", "revoked_by")
    readonly_fields = ("figures",)


@admin.register(DevelopmentLabel)
class DevelopmentLabelAdmin(RecordAdmin):
    """Read-only: development data is written once, with the version it built
    (``labeling.improve.judge_version_improve``); editing it would change which labels a
    version's trust decision may use."""

    list_display = ("__str__", "judge_version", "trial", "label", "created_at")
    list_select_related = ("judge_version__judge",)
    raw_id_fields = ("judge_version", "trial", "label")
    readonly_fields = ("judge_version", "trial", "label", "created_at")


@admin.register(JudgeClaim)
class JudgeClaimAdmin(ViewOnly, admin.ModelAdmin):
    """Claims on judge calls in flight (``judges.claims``): read-only, written by workers."""

    list_display = ("__str__", "judge_version", "judge_run", "lease_expires_at", "claimed_at")
    list_select_related = ("judge_version__judge",)
    readonly_fields = (
        "judge_version",
        "trial",
        "grader",
        "pair",
        "position",
        "judge_run",
        "holder",
        "lease_expires_at",
        "claimed_at",
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(JudgeCallRecord)
class JudgeCallRecordAdmin(ViewOnly, admin.ModelAdmin):
    """The judge call ledger (``judges.ledger``): read-only, one row per call paid."""

    list_display = (
        "nonce",
        "judge_version",
        "run",
        "status",
        "outcome",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "sent_at",
    )
    list_filter = ("status", "outcome")
    list_select_related = ("judge_version__judge", "run")
    search_fields = ("nonce", "grader")
    readonly_fields = (
        "nonce",
        "judge_version",
        "run",
        "trial",
        "grader",
        "pair",
        "position",
        "judge_run",
        "status",
        "outcome",
        "attempts",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "price_source",
        "latency_ms",
        "sent_at",
        "answered_at",
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
