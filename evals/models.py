"""Suites, cases, runs, trials and grades: what was asked, how often, and what came back.

Invariants:
- A case is frozen: its content (input, expected, context documents) is hashed; a change
  makes a new case and retires the old one, so runs weeks apart compare the same thing.
- One trial per (run, case, attempt) and one grade per (trial, grader), enforced by the
  database, so a redelivered or retried task never duplicates or loses a row.
- Unknown is null: a trial's cost is null when its model's price is unknown; an errored
  grade has ``passed = None``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from core.actors import Via, actor_text
from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from evals.grading.grader_set import GraderSet


def content_hash(*, input: Any, expected: Any, context: Any, goal_state: Any = None) -> str:
    """SHA-256 (hex, 64 chars) of a case's content in canonical JSON (sorted keys, no spaces).

    ``goal_state`` (an agent case's wanted final state) counts only when it is not None, so
    the hash of every case without one is what it was before goal states existed."""
    content = {"input": input, "expected": expected, "context": context}
    if goal_state is not None:
        content["goal_state"] = goal_state
    payload = json.dumps(
        content,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def input_hash(*, input: Any, context: Any) -> str:
    """SHA-256 (hex, 64 chars) of what a case asks, its input and context documents, in
    canonical JSON (not its expected answer nor its goal state): the key of its group, every
    case asked the same thing (the two sides of an LLMBar pair, the versions of a case whose
    expected answer was edited, the same input in other suites). Blind reviewing hides the
    verdicts of a whole group (``evals.blindness``)."""
    payload = json.dumps(
        {"input": input, "context": context},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Suite(models.Model):
    """A frozen collection of cases run as a unit."""

    class Kind(models.TextChoices):
        CAPABILITY = "capability", "capability"
        REGRESSION = "regression", "regression"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.REGRESSION)
    trust_thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text='Judge trust thresholds for this suite, overriding settings ASSAY["TRUST"]: '
        '{"MIN_N": 30, "MIN_KAPPA": 0.6, "MAX_FAR": 0.10} (any subset; '
        "labeling.selectors.trust_thresholds).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CaseQuerySet(models.QuerySet):
    def active(self) -> CaseQuerySet:
        return self.filter(retired_at__isnull=True)


class Case(models.Model):
    """One input of a suite, with its optional expected answer, context documents and tags.

    ``input`` is a string or a JSON object; ``expected`` any JSON value or null;
    ``context`` a list of ``{"id": str, "text": str}``; ``tags`` a list of strings;
    ``goal_state`` an agent case's wanted final state (any JSON, null for none; part of the
    content hash when set).
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    key = models.CharField(max_length=200)
    input = models.JSONField()
    expected = models.JSONField(null=True, blank=True)
    context = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    goal_state = models.JSONField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, db_index=True, editable=False)
    # The case's group (``input_hash``): every case with the same input and context.
    input_hash = models.CharField(max_length=64, db_index=True, editable=False, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaces"
    )

    objects = CaseQuerySet.as_manager()

    class Meta:
        ordering = ["suite_id", "key", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "key"],
                condition=Q(retired_at__isnull=True),
                name="case_unique_active_key_per_suite",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite_id}:{self.key}"

    def save(self, *args, **kwargs):
        self.content_hash = content_hash(
            input=self.input,
            expected=self.expected,
            context=self.context,
            goal_state=self.goal_state,
        )
        self.input_hash = input_hash(input=self.input, context=self.context)
        super().save(*args, **kwargs)

    @property
    def input_text(self) -> str:
        """The input as display text: strings as they are, JSON objects pretty-printed."""
        if isinstance(self.input, str):
            return self.input
        return json.dumps(self.input, indent=2, ensure_ascii=False)


class RunQuerySet(models.QuerySet):
    def finished(self) -> RunQuerySet:
        return self.filter(status__in=Run.TERMINAL)

    def active(self) -> RunQuerySet:
        return self.exclude(status__in=Run.TERMINAL)


class Run(models.Model):
    """One execution of a suite against one target configuration, N trials per case.

    ``target`` is the snapshot of the target configuration at start: ``{"kind": ...,
    "model": ..., "prompt_template": ..., "prompt_revision": ..., "settings": {...}, ...}``;
    ``graders`` the grader set: a list of ``{"key", "kind", "config", "gating"}``.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

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

    def __str__(self) -> str:
        return f"{self.suite.name} / {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("evals:run-detail", kwargs={"run_id": self.uuid})

    @property
    def ref_text(self) -> str:
        """How a message names the run: its name and public UUID, "nightly (3f2c…)"; never
        the internal integer id (no query)."""
        return f"{self.name} ({self.uuid})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def is_simulated(self) -> bool:
        return self.target_kind == "simulated"

    @property
    def cancelled_text(self) -> str:
        """Who cancelled the run, after "cancelled" ("by carol", "from the command line",
        "by the system"; ``core.actors.actor_text``); "" when it is not cancelled, or was
        cancelled before the actor was recorded."""
        if self.status != self.Status.CANCELLED:
            return ""
        if not self.cancelled_via and self.cancelled_by_id is None:
            return ""
        return actor_text(by=self.cancelled_by, via=self.cancelled_via or None)

    @cached_property
    def grader_set(self) -> GraderSet:
        """The stored grader set, typed (``GraderSet.from_stored``): the one way code reads
        ``graders``."""
        return GraderSet.from_stored(self.graders)


class TrialQuerySet(models.QuerySet):
    def errored(self) -> TrialQuerySet:
        return self.filter(status=Trial.Status.ERROR)

    def ok(self) -> TrialQuerySet:
        return self.filter(status=Trial.Status.OK)


class Trial(models.Model):
    """One attempt (1..N) of one case in a run: output, tokens, latency, cost, status.

    ``latency_ms`` is wall-clock milliseconds of the target call; ``cost_usd`` is null when
    the model's price is unknown (never zero by default).
    """

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
    cost_usd = models.DecimalField(
        max_digits=COST_USD_MAX_DIGITS,
        decimal_places=COST_USD_DECIMAL_PLACES,
        null=True,
        blank=True,
    )
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


class GradeQuerySet(models.QuerySet):
    def ok(self) -> GradeQuerySet:
        return self.filter(status=Grade.Status.OK)

    def errored(self) -> GradeQuerySet:
        return self.filter(status=Grade.Status.ERROR)

    def not_judged(self) -> GradeQuerySet:
        return self.filter(status=Grade.Status.NOT_JUDGED)


class Grade(models.Model):
    """A grader's verdict on a trial: passed, score 0..1, reason, status.

    An errored grade (the grader raised, a judge call failed, the reply was unparseable)
    has ``passed = None`` and ``score = None``; every aggregate leaves it out and counts it.
    A "not judged" grade (``status = not_judged``) is a judge rung the grader ladder skipped
    (``skip_if_failed``: a gating deterministic grader already failed the trial): no call was
    made, ``passed`` and ``score`` are None, ``details.decided_by`` names the rung that
    decided. It is neither a pass nor a fail: left out of every rate, calibration, cost
    and agreement; the trial's overall verdict is decided by the rung that failed it.
    """

    class Status(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"
        NOT_JUDGED = "not_judged", "not judged"

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="grades")
    grader = models.CharField(max_length=200)
    grader_version = models.CharField(max_length=100, blank=True)
    judge_version = models.ForeignKey(
        "judges.JudgeVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="grades",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OK)
    passed = models.BooleanField(null=True)
    score = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    gating = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GradeQuerySet.as_manager()

    class Meta:
        ordering = ["trial_id", "grader"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "grader"], name="grade_unique_trial_grader"),
            models.CheckConstraint(
                condition=Q(status__in=["error", "not_judged"], passed__isnull=True)
                | Q(status="ok", passed__isnull=False),
                name="grade_passed_null_iff_not_ok",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=0, score__lte=1),
                name="grade_score_in_unit_interval",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.grader} on {self.trial_id}"


def grade_skipped_placeholder(grade: dict) -> bool:
    """Whether a stored judge grade (a dict with ``details`` and ``reason``, e.g. from a run
    file) is an older Assay's placeholder for a rung the ladder skipped: stored then as
    ``ok``/``passed = false`` with ``details.skipped = true`` or a reason starting
    "not judged: " (the markers migration ``evals.0009_grade_not_judged`` recognizes).
    Such a grade is read as not judged, never as a fail."""
    details = grade.get("details")
    return bool(isinstance(details, dict) and details.get("skipped") is True) or str(
        grade.get("reason") or ""
    ).startswith("not judged: ")


class TrialPair(models.Model):
    """Two trials of the same case compared with each other (response A and response B).

    Pairwise records (human preferences, pairwise judge verdicts) are stored against a pair.
    """

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


class TopUp(models.Model):
    """Settling a comparison's suspect cases with more trials (the gate's top-up rounds).

    ``base`` and ``head`` are the compared runs; trials are added, in rounds, to the head
    run (and to the base run when ``base_replayed``) as ordinary trials marked with this
    top-up and their round (``Trial.top_up``/``top_up_round``); nothing is deleted. ``plan``
    is the design fixed when it started (``stats.sequential.TopUpPlan`` fields); the
    gate's decision over the runs' own trials plus these is in ``decision`` (the gate's
    JSON) once it ends. ``adaptive``: started by a run started against a baseline
    (``run_suite --against``). Caps: ``max_trials_per_case`` a side (first trials
    included), ``max_cost_usd`` (USD; null: no cap).
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SETTLED = "settled", "settled"
        CAPPED = "capped", "stopped at a cap"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    TERMINAL = (Status.SETTLED, Status.CAPPED, Status.FAILED, Status.CANCELLED)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    base = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="top_ups_as_base")
    head = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="top_ups_as_head")
    alpha = models.FloatField(default=0.05)
    plan = models.JSONField(default=dict)
    base_replayed = models.BooleanField(default=True)
    adaptive = models.BooleanField(default=False)
    max_trials_per_case = models.PositiveIntegerField()
    max_cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    rounds_done = models.PositiveSmallIntegerField(default=0)
    trials_added = models.PositiveIntegerField(default=0)
    decision = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"top-up of {self.head_id} against {self.base_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class Baseline(models.Model):
    """The run a suite's new runs are compared against; every change is a new row, so the
    history of who set which baseline, and when, is kept. The current baseline of a suite
    is its latest row."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="baselines")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="baseline_of")
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    set_at = models.DateTimeField(default=timezone.now)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-set_at", "-id"]
        get_latest_by = "set_at"

    def __str__(self) -> str:
        return f"baseline of {self.suite_id}: run {self.run_id}"


class Graduation(models.Model):
    """A capability case copied into a regression suite once it passed every trial of the
    last runs; records who did it and when."""

    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="graduations")
    regression_case = models.ForeignKey(
        Case, on_delete=models.PROTECT, related_name="graduated_from"
    )
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    at = models.DateTimeField(default=timezone.now)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.case_id} -> {self.regression_case_id}"


def preset_hash(value: Any) -> str:
    """SHA-256 (hex, 64 chars) of a preset's content in canonical JSON (sorted keys)."""
    payload = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Preset(models.Model):
    """A named piece of configuration declared in config-as-code (``apply_config``), with
    the content hash of its ``content`` field. Runs copy a preset into their own snapshot
    when they start, so changing a preset never changes past runs."""

    content_field = ""  # the JSON field hashed into content_hash

    name = models.CharField(max_length=200, unique=True)
    content_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs):
        self.content_hash = preset_hash(getattr(self, self.content_field))
        super().save(*args, **kwargs)


class TargetPreset(Preset):
    """A named target configuration (``apply_config``'s ``[targets.NAME]``)."""

    content_field = "config"
    config = models.JSONField(default=dict)

    class Meta(Preset.Meta):
        pass


class GraderSetPreset(Preset):
    """A named grader set, a list of grader spec dicts (see ``evals.grading.graders``;
    ``[grader_sets.NAME]``)."""

    content_field = "graders"
    graders = models.JSONField(default=list)

    class Meta(Preset.Meta):
        pass


class IngestKey(models.Model):
    """The first successful bulk ingest (``interop.ingest``) under one idempotency key: the
    ``Idempotency-Key`` header or the header object's ``run_key`` (one namespace, unique
    across users). A repeat with the same key and the same body (``body_sha256``, hex of the
    raw request bytes) gets ``status_code`` and ``response`` (JSON text) back and writes
    nothing; a different body under the key is refused (409). The unique key makes two
    concurrent requests with one key write once. A failed request stores no row."""

    key = models.CharField(max_length=255, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    body_sha256 = models.CharField(max_length=64)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="ingest_keys"
    )
    status_code = models.PositiveSmallIntegerField()
    # The response body as JSON text: a replay sends the same bytes (jsonb would reorder keys).
    response = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.key


class CaseChange(models.Model):
    """One change to a suite's golden set, with who made it and when (written only by
    ``evals.cases.cases_upsert`` and the case editor's services in ``evals.case_changes``).

    ``action``: ``created`` (a new key), ``replaced`` (new content or a new key for an active
    case: ``previous`` is the case it retired, ``case`` the new one), ``retagged`` (tags only,
    saved in place: tags are not content, see ``evals.case_changes``), ``retired``.
    ``via`` names the path (editor, api, import, config, admin, graduation, ...);
    ``source_trial`` the trial a case was added from ("Add as a case"); ``details`` holds
    ``{"tags": [old, new]}`` for a retag and ``{"key": [old, new]}`` for a rename.
    Rows are only ever added, never edited.
    """

    class Action(models.TextChoices):
        CREATED = "created", "created"
        REPLACED = "replaced", "replaced"
        RETAGGED = "retagged", "retagged"
        RETIRED = "retired", "retired"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="case_changes")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="changes")
    previous = models.ForeignKey(
        Case, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes_as_previous"
    )
    action = models.CharField(max_length=20, choices=Action.choices)
    via = models.CharField(max_length=40, blank=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now, db_index=True)
    source_trial = models.ForeignKey(
        "Trial", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["suite", "-at"], name="casechange_suite_at")]

    def __str__(self) -> str:
        return f"{self.action} {self.case_id}"


class RunSummary(models.Model):
    """What a comparison reads of a finished run, kept so that the first view of any pair
    of runs reads two rows instead of every trial and grade (``evals.comparison.summary``).

    ``key``: the run's fingerprint when the summary was computed (status, grader set,
    trials, grades and their verdicts, judge trust, the suite's case changes); a summary
    whose key differs from the run's current one is stale and never read. ``body``: the
    run's graders, per-case data and judge versions as compact JSON (the ``RunData`` of the
    run's own trials without its identity, which is read fresh from the run). ``detectable``:
    alpha (as text) -> the base's detectable drop at that alpha (``DetectableDrop`` as a dict,
    or None when undefined), filled on first need.
    """

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=300)
    body = models.TextField()
    detectable = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"summary of run {self.run_id}"


class DecisionTransition(models.Model):
    """One change of a trial's contract decision caused by a label change
    (``labeling.decision_history``): ``from_decision`` -> ``to_decision`` (values of
    ``evals.grading.contract.decisions.DECISIONS``), written in the same transaction as the
    label change by ``reviewer`` at ``label_version`` (their ``LabelRevision`` on the trial:
    ``cause`` says which kind: created, revised or undo). The decision itself is never
    stored: it is derived from the labels of record; this is its history."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="decision_transitions")
    from_decision = models.CharField(max_length=30)
    to_decision = models.CharField(max_length=30)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    label_version = models.PositiveIntegerField()
    cause = models.CharField(max_length=20)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"trial {self.trial_id}: {self.from_decision} -> {self.to_decision}"
