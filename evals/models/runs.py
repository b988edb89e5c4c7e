"""Runs and their trials: one execution of a suite against a target, N trials per case, and the
pairs of trials compared with each other. One trial per (run, case, attempt), enforced by
the database; a trial's cost is null when its price is unknown."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from core.actors import Via, actor_text
from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from evals.grading.grader_set import GraderSet
from evals.models.suites import Case, Suite


class RunQuerySet(models.QuerySet):
    def finished(self) -> RunQuerySet:
        return self.filter(status__in=Run.TERMINAL)

    def active(self) -> RunQuerySet:
        return self.exclude(status__in=Run.TERMINAL)


class Run(models.Model):
    """One execution of a suite against one target configuration, N trials per case. ``target``:
    the config snapshot at start (``{"kind", "model", "prompt_template", "settings", ...}``);
    ``graders``: ``[{"key", "kind", "config", "gating"}]``."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"
        # Being deleted by ``runs_prune`` (evals.prune): neither live nor finished, so no
        # worker, sweep, comparison or cache reads it as complete; the next prune finishes it.
        PRUNING = "pruning", "pruning"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    class Source(models.TextChoices):
        EXECUTED = "executed", "executed by Assay"
        IMPORTED = "imported", "imported"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="runs")
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.EXECUTED)
    target_kind = models.CharField(max_length=40)
    model = models.CharField(max_length=200, blank=True)
    target = models.JSONField(default=dict, blank=True)
    graders = models.JSONField(default=list, blank=True)
    source_version = models.CharField(max_length=200, blank=True)
    trials_per_case = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    trials_total = models.PositiveIntegerField(default=0)
    trials_finished = models.PositiveIntegerField(default=0)
    trials_errored = models.PositiveIntegerField(default=0)
    # Trials cancelled before they ran (never finished, never errored): evals.run_status.
    trials_cancelled = models.PositiveIntegerField(default=0)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # Who cancelled it (``run_cancel``): the user, when there was one, and where the cancel
    # came from (``core.actors.Via``; blank while not cancelled). Read as text with
    # ``cancelled_text``.
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs_cancelled",
    )
    cancelled_via = models.CharField(max_length=10, choices=Via.choices, blank=True)
    # An adaptive run (``run_suite --against``): when its first N trials per case are done,
    # a top-up against this baseline spends more trials only where the gate is uncertain.
    against = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="adaptive_runs"
    )

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "name"], name="run_unique_name_per_suite"),
        ]
        indexes = [
            # The live runs (evals.metrics, read at every scrape of /metrics): a partial
            # index, so finding them does not read the finished ones.
            models.Index(
                fields=["status"],
                condition=Q(status__in=["queued", "running"]),
                name="run_live",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite.name} / {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("evals:run-detail", kwargs={"run_id": self.uuid})

    @property
    def ref_text(self) -> str:
        """ "nightly (<uuid>)": the run's name and public UUID, never its integer id; no query."""
        return f"{self.name} ({self.uuid})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def is_simulated(self) -> bool:
        return self.target_kind == "simulated"

    @property
    def cancelled_text(self) -> str:
        """Who cancelled the run, after "cancelled" ("by carol", "from the command line"); ""
        when not cancelled or the actor was not recorded."""
        if self.status != self.Status.CANCELLED:
            return ""
        if not self.cancelled_via and self.cancelled_by_id is None:
            return ""
        return actor_text(by=self.cancelled_by, via=self.cancelled_via or None)

    @cached_property
    def grader_set(self) -> GraderSet:
        """The stored grader set, typed: the one way code reads ``graders``."""
        return GraderSet.from_stored(self.graders)


class TrialQuerySet(models.QuerySet):
    def errored(self) -> TrialQuerySet:
        return self.filter(status=Trial.Status.ERROR)

    def ok(self) -> TrialQuerySet:
        return self.filter(status=Trial.Status.OK)


class Trial(models.Model):
    """One attempt (1..N) of one case in a run. ``latency_ms``: wall-clock ms of the target call;
    tokens: the disjoint classes ``providers.usage`` defines (null: the answer did not say;
    0 only when it said 0); ``cost_usd``: null when the price is unknown, never zero by
    default; ``cost_basis``: what it rests on (``providers.pricing.Costing.basis``, or
    ``{"source": "target"}`` for the target's own account), kept until ``reprice_run``."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        OK = "ok", "ok"
        ERROR = "error", "error"
        CANCELLED = "cancelled", "cancelled"

    FINISHED = (Status.OK, Status.ERROR)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="trials")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="trials")
    attempt = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    output = models.TextField(blank=True)
    raw_response = models.JSONField(null=True, blank=True)
    # The exact request sent for this trial (an OpenAI-compatible target: the JSON body,
    # model, messages as rendered, generation settings); null when the target sent none.
    request = models.JSONField(null=True, blank=True)
    # An agent trial's ordered steps (evals.trajectory.steps) and the world's state at its
    # end; null for a trial that has none. The report never loads them.
    trajectory = models.JSONField(null=True, blank=True)
    final_state = models.JSONField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_read_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(
        max_digits=COST_USD_MAX_DIGITS,
        decimal_places=COST_USD_DECIMAL_PLACES,
        null=True,
        blank=True,
    )
    # The price a cost was given, or why it is unknown: a price added later never changes
    # it; only ``manage.py reprice_run`` does (``evals.reprice``). Null: not priced here
    # (errored, imported without one — a run file carries it —, or written before token classes).
    cost_basis = models.JSONField(null=True, blank=True)
    # Settable: imported trials keep the time their source recorded (always aware, UTC).
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Trials added to settle a comparison's suspect cases (``TopUp``), round 1, 2, ...;
    # null for the run's own trials. A comparison reads only its own top-up trials.
    top_up = models.ForeignKey(
        "TopUp", null=True, blank=True, on_delete=models.PROTECT, related_name="trials"
    )
    top_up_round = models.PositiveSmallIntegerField(null=True, blank=True)
    # A retried errored trial points at the attempt that replaced it: kept as history, left
    # out of every figure (``run_retry``).
    replaced_by = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaces"
    )
    # Not stored: set by the selectors that read trials for a viewer (``trial_get``,
    # ``evals.blindness``): True when its grades and gold label are hidden from them.
    blind: bool

    objects = TrialQuerySet.as_manager()

    class Meta:
        ordering = ["run_id", "case_id", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "case", "attempt"], name="trial_unique_run_case_attempt"
            ),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="trial_attempt_from_1"),
        ]
        indexes = [
            models.Index(fields=["run", "status"]),
            # The trials a reader counts (not retried) of some runs, with their case,
            # status and id, from the index alone: the grid's cells, usage totals and the
            # runs' fingerprints (evals.fingerprint: every trial's status and id, and the
            # ids its grades join on) read them without touching the rows (outputs), and
            # SQLite, with no statistics, would otherwise walk every unretried trial of
            # every run through the replaced_by index. The id is a key column, not an
            # INCLUDE one: SQLite has none (its indexes hold the rowid anyway).
            models.Index(
                fields=["run", "replaced_by", "case", "status", "id"], name="trial_run_readable"
            ),
        ]

    def __str__(self) -> str:
        return f"trial {self.case_id}#{self.attempt}"


class TrialPair(models.Model):
    """Two trials of one case compared (A and B); pairwise records are stored against a pair."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="pairs")
    trial_a = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="pairs_as_a")
    trial_b = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="pairs_as_b")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial_a", "trial_b"], name="pair_unique_trials"),
        ]

    def __str__(self) -> str:
        return f"pair {self.trial_a_id}/{self.trial_b_id}"
