"""Judges and their immutable versions, and pairwise verdicts.

A judge version is content-addressed: any change to model, prompt, parameters or output
schema makes a new version (a new ``content_hash``). A new version is untrusted: its
grades are provisional until calibration and a lead's approval (labeling issue).
"""

from __future__ import annotations

import hashlib
import json
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.actors import Via, actor_text
from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS


class Judge(models.Model):
    """A named LLM grader; its behaviour lives in its versions."""

    class Kind(models.TextChoices):
        RUBRIC = "rubric", "rubric (pointwise)"
        PAIRWISE = "pairwise", "pairwise"
        FAITHFULNESS = "faithfulness", "faithfulness"
        FAITHFULNESS_CLAIMS = "faithfulness_claims", "faithfulness (claim mode)"
        CONTEXT_RELEVANCE = "context_relevance", "context relevance"
        RECORDED = "recorded", "recorded elsewhere (imported)"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def judge_version_hash(
    *,
    model: str,
    protocol: str,
    prompt_template: str,
    params: dict,
    output_schema: dict,
    threshold: float | None,
    base_url: str = "",
) -> str:
    """SHA-256 (hex) over everything that defines a judge version's behaviour.

    ``base_url`` enters the payload only when set, so versions recorded elsewhere (no
    endpoint) keep the hash they were imported with.
    """
    extra = {"base_url": base_url} if base_url else {}
    payload = json.dumps(
        {
            **extra,
            "model": model,
            "protocol": protocol,
            "prompt_template": prompt_template,
            "params": params,
            "output_schema": output_schema,
            "threshold": threshold,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgeVersionQuerySet(models.QuerySet):
    def _active_approval(self) -> models.Exists:
        return models.Exists(
            JudgeApproval.objects.active().filter(judge_version=models.OuterRef("pk"))
        )

    def trusted(self) -> JudgeVersionQuerySet:
        """Versions with an active approval."""
        return self.filter(self._active_approval())

    def untrusted(self) -> JudgeVersionQuerySet:
        """Versions without an active approval (provisional)."""
        return self.filter(~self._active_approval())

    def with_trust(self) -> JudgeVersionQuerySet:
        """Each version annotated with ``trusted`` (bool), so ``is_trusted`` needs no query."""
        return self.annotate(trusted=self._active_approval())


class JudgeVersion(models.Model):
    """An immutable LLM grader: model, prompt template, parameters, output schema.

    ``protocol`` names the prompt protocol when the version was recorded elsewhere
    (imported verdicts). Trust is stored once, as an active ``JudgeApproval``: a version
    is trusted while one exists (``is_trusted``; ``JudgeVersion.objects.trusted()``).
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64, editable=False)
    base_url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200)
    protocol = models.CharField(max_length=200, blank=True)
    prompt_template = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(default=dict, blank=True)
    threshold = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = JudgeVersionQuerySet.as_manager()

    class Meta:
        ordering = ["judge__name", "number"]
        constraints = [
            models.UniqueConstraint(fields=["judge", "number"], name="judge_version_unique_number"),
            models.UniqueConstraint(
                fields=["judge", "content_hash"], name="judge_version_unique_content"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge.name} v{self.number}"

    def save(self, *args, **kwargs):
        self.content_hash = judge_version_hash(
            model=self.model,
            protocol=self.protocol,
            prompt_template=self.prompt_template,
            params=self.params,
            output_schema=self.output_schema,
            threshold=self.threshold,
            base_url=self.base_url,
        )
        super().save(*args, **kwargs)

    @property
    def grader_key(self) -> str:
        """The key its grades carry in ``Grade.grader``."""
        return f"judge:{self.judge.name}:v{self.number}"

    def refresh_from_db(self, *args, **kwargs) -> None:
        self.__dict__.pop("trusted", None)  # trust is re-read, as every other field
        super().refresh_from_db(*args, **kwargs)

    @property
    def is_trusted(self) -> bool:
        """True while the version has an active (unrevoked) approval; one query per instance
        unless the queryset came from ``with_trust()`` (then none)."""
        if not hasattr(self, "trusted"):
            self.trusted = self.approvals.active().exists()
        return bool(self.trusted)


class PairwiseVerdict(models.Model):
    """One presentation of a pair to a pairwise judge version, in original A/B naming.

    ``position`` is ``original`` (A shown first) or ``swapped`` (B shown first);
    ``preferred`` is always in the original naming, null when the call errored or the reply
    had no parseable verdict. ``nonce`` names the call it came from (its ledger row,
    ``JudgeCallRecord.nonce``); empty when no call was made (a refused template).
    """

    class Position(models.TextChoices):
        ORIGINAL = "original", "A shown first"
        SWAPPED = "swapped", "B shown first"

    class Status(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"

    pair = models.ForeignKey("evals.TrialPair", on_delete=models.CASCADE, related_name="verdicts")
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.PROTECT, related_name="pairwise_verdicts"
    )
    position = models.CharField(max_length=10, choices=Position.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OK)
    preferred = models.CharField(max_length=1, blank=True, choices=[("A", "A"), ("B", "B")])
    score = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    nonce = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge_version", "position"],
                name="pairwise_verdict_unique_presentation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_version} {self.position}: {self.preferred or 'error'}"


class JudgeRun(models.Model):
    """One judge version grading (a sample of) one run's trials: progress and cancellation.

    One row per (run, judge version): starting again reuses it (grades are idempotent per
    (trial, grader)). Counts are recounted from the grade rows, never incremented blindly.

    A pairwise judge run (``base_run`` set; ``judges.runs.pairwise_judge_run_start``)
    compares ``run`` (the head) with ``base_run`` pair by pair: one row per (head, base,
    judge version);
    ``trial_ids`` then holds ``TrialPair`` ids (base trial = A, head trial = B), the
    ``trials_*`` counts count pairs (graded: both presentation orders stored; errored: an
    order without a verdict), recounted from the ``PairwiseVerdict`` rows; ``unpaired``
    counts ok trials of either run with no counterpart (same case and attempt, ok) in the
    other.
    ``failed``: every grade errored (no verdict at all); ``error_message`` says why (also set,
    on a ``succeeded`` one, when some grades errored). ``cancelled_by``: who cancelled it.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey("evals.Run", on_delete=models.CASCADE, related_name="judge_runs")
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.PROTECT, related_name="judge_runs"
    )
    base_run = models.ForeignKey(
        "evals.Run",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="pairwise_judge_runs_as_base",
    )
    grader = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    unpaired = models.PositiveIntegerField(default=0)
    trial_ids = models.JSONField(default=list, blank=True)
    trials_total = models.PositiveIntegerField(default=0)
    trials_graded = models.PositiveIntegerField(default=0)
    trials_errored = models.PositiveIntegerField(default=0)
    error_message = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_runs_cancelled",
    )
    # Where the cancel came from (``core.actors.Via``; blank while not cancelled).
    cancelled_via = models.CharField(max_length=10, choices=Via.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "judge_version"],
                condition=Q(base_run__isnull=True),
                name="judge_run_unique_run_version",
            ),
            models.UniqueConstraint(
                fields=["run", "base_run", "judge_version"],
                condition=Q(base_run__isnull=False),
                name="judge_run_unique_pairwise",
            ),
        ]

    def __str__(self) -> str:
        if self.base_run_id:
            return f"{self.judge_version} on run {self.run_id} against {self.base_run_id}"
        return f"{self.judge_version} on run {self.run_id}"

    @property
    def cancelled_text(self) -> str:
        """Who cancelled the judge run, after "cancelled" ("by carol", "from the command
        line", "by the system"; ``core.actors.actor_text``); "" when it is not cancelled, or
        was cancelled before the actor was recorded."""
        if self.status != self.Status.CANCELLED:
            return ""
        if not self.cancelled_via and self.cancelled_by_id is None:
            return ""
        return actor_text(by=self.cancelled_by, via=self.cancelled_via or None)

    @property
    def is_pairwise(self) -> bool:
        """True for a pairwise judge run (head ``run`` against ``base_run``)."""
        return self.base_run_id is not None

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def progress(self) -> float | None:
        """Trials graded / trials to grade (fraction 0..1); None when there is none."""
        return self.trials_graded / self.trials_total if self.trials_total else None


class ProbeRun(models.Model):
    """One run of the built-in injection probe set (``judges.probes``) against a judge
    version: when, by whom, and the report — ``judged`` probes with a verdict, ``fooled`` of
    them passed although a sound judge fails them, ``errored`` calls counted apart.

    ``results`` is a list of ``{"name", "passed" (bool|None), "correct" (bool|None),
    "reason", "reasoning" (the judge's own words, untrusted)}`` in probe order. A probe run
    that could not run at all is ``failed`` with ``error`` saying why (never an empty report
    that reads as "not fooled").
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"

    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.CASCADE, related_name="probe_runs"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    probes_total = models.PositiveIntegerField(null=True, blank=True)
    judged = models.PositiveIntegerField(null=True, blank=True)
    fooled = models.PositiveIntegerField(null=True, blank=True)
    errored = models.PositiveIntegerField(null=True, blank=True)
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"probes on {self.judge_version} ({self.status})"


class JudgeApprovalQuerySet(models.QuerySet):
    def active(self) -> JudgeApprovalQuerySet:
        """Approvals not revoked: at most one per judge version, which is then trusted."""
        return self.filter(revoked_at__isnull=True)


class JudgeApproval(models.Model):
    """A lead's approval of a judge version, with the calibration figures it was granted
    on (``Calibration.as_json()``); revoked approvals keep who, when and why."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.CASCADE, related_name="approvals"
    )
    calibration_set = models.ForeignKey(
        "labeling.CalibrationSet",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="approvals",
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judge_approvals"
    )
    approved_at = models.DateTimeField(default=timezone.now)
    figures = models.JSONField(default=dict)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="judge_revocations",
    )
    revoke_reason = models.TextField(blank=True)

    objects = JudgeApprovalQuerySet.as_manager()

    class Meta:
        ordering = ["-approved_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge_version"],
                condition=Q(revoked_at__isnull=True),
                name="judge_approval_one_active",
            ),
        ]

    def __str__(self) -> str:
        return f"approval of {self.judge_version_id} by {self.approved_by_id}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class DevelopmentLabel(models.Model):
    """A human label a judge version was built from (its few-shot examples): development
    data, never counted in that version's calibration figures or trust decision.

    Written once, with the version, by ``labeling.improve.judge_version_improve``. Held out
    by trial: every label on ``trial`` is left out of the version's figures (the judge was
    shown that trial's output), so ``trial`` is kept when the label itself is later removed
    (``label`` then null)."""

    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.CASCADE, related_name="development_labels"
    )
    trial = models.ForeignKey(
        "evals.Trial", on_delete=models.CASCADE, related_name="development_labels"
    )
    label = models.ForeignKey(
        "labeling.Label",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="development_of",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["judge_version_id", "trial_id", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge_version", "label"], name="development_label_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"label {self.label_id} (trial {self.trial_id}) develops {self.judge_version_id}"


def development_trial_ids(judge_version_ids) -> set[int]:
    """Trial ids any of ``judge_version_ids`` was built from (its development data)."""
    return set(
        DevelopmentLabel.objects.filter(judge_version_id__in=list(judge_version_ids)).values_list(
            "trial_id", flat=True
        )
    )


class JudgeClaim(models.Model):
    """A worker's hold on one judge call still to be made, so no two workers pay for it.

    The key is the row the call will write: a grade's (``trial``, ``grader``) (the grader
    names its judge version), or a pairwise verdict's (``pair``, ``judge_version``,
    ``position``). ``holder`` is the token of the one execution of a chunk that holds it;
    ``lease_expires_at`` is renewed while its call is in flight, and once it has passed
    another execution may take the claim over (a dead worker's claims are retaken by a
    redelivery or by the sweeper, ``judges.claims.judge_claims_sweep``). The claim is
    deleted in the transaction that writes its grade or verdict, or released when the call
    is not made. ``judge_run`` names the judge run the call belongs to (None: the run's own
    judge rung), so the sweeper knows which task to enqueue again.
    """

    judge_version = models.ForeignKey(JudgeVersion, on_delete=models.CASCADE, related_name="claims")
    trial = models.ForeignKey(
        "evals.Trial", null=True, blank=True, on_delete=models.CASCADE, related_name="judge_claims"
    )
    grader = models.CharField(max_length=200, blank=True)
    pair = models.ForeignKey(
        "evals.TrialPair",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judge_claims",
    )
    position = models.CharField(max_length=10, blank=True)
    judge_run = models.ForeignKey(
        "JudgeRun", null=True, blank=True, on_delete=models.CASCADE, related_name="claims"
    )
    holder = models.UUIDField()
    lease_expires_at = models.DateTimeField()
    claimed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["trial", "grader"],
                condition=Q(trial__isnull=False),
                name="judge_claim_unique_grade",
            ),
            models.UniqueConstraint(
                fields=["pair", "judge_version", "position"],
                condition=Q(pair__isnull=False),
                name="judge_claim_unique_presentation",
            ),
            models.CheckConstraint(
                condition=Q(trial__isnull=False, pair__isnull=True)
                | Q(trial__isnull=True, pair__isnull=False),
                name="judge_claim_trial_xor_pair",
            ),
        ]
        indexes = [
            models.Index(fields=["holder"], name="judge_claim_holder"),
            models.Index(fields=["lease_expires_at"], name="judge_claim_lease"),
        ]

    def __str__(self) -> str:
        key = f"trial {self.trial_id} {self.grader}" if self.trial_id else f"pair {self.pair_id}"
        return f"claim on {key} by {self.holder}"


class JudgeCallRecord(models.Model):
    """One call Assay sent to a judge endpoint: the provider's bill, line by line.

    Written as the call is sent (``status`` sent, within ``judges.calling.WRITE_WINDOW_S``:
    tokens and cost unknown until the answer is recorded, so a worker killed mid-call still
    leaves its call counted) and
    completed when the answer arrives (``answered``, or ``failed`` when the provider or the
    transport failed after every attempt). ``attempts`` counts the HTTP requests the call
    made (retries included). ``cost_usd`` is USD at the answering model's price, null when
    the price or a token count is unknown (never zero for unknown). ``outcome`` says what
    became of the answer: ``stored`` (its grade or verdict is the one kept), ``lost`` (the
    row was written first by another call for the same key: a race the claims make rare,
    and still a paid call), or empty while pending.

    ``nonce`` is the call's fence nonce (``judges.prompts``), also kept in the grade's
    ``details.nonce``: it names the call. ``run`` is the run whose trial was judged (the
    head run for a pairwise call); ``trial``/``grader`` or ``pair``/``position`` the key
    the call was made for; ``judge_run`` the judge run it belongs to (None: a run's judge
    rung or a direct call); ``probe_run`` the injection probe run it belongs to (no run,
    trial or pair: a probe is no trial).
    """

    class Status(models.TextChoices):
        SENT = "sent", "sent, no answer recorded"
        ANSWERED = "answered", "answered"
        FAILED = "failed", "failed"

    class Outcome(models.TextChoices):
        PENDING = "", "pending"
        STORED = "stored", "stored"
        LOST = "lost", "lost a race"

    nonce = models.CharField(max_length=64, unique=True)
    judge_version = models.ForeignKey(
        JudgeVersion, on_delete=models.PROTECT, related_name="call_records"
    )
    run = models.ForeignKey(
        "evals.Run",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judge_call_records",
    )
    trial = models.ForeignKey(
        "evals.Trial",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judge_call_records",
    )
    grader = models.CharField(max_length=200, blank=True)
    pair = models.ForeignKey(
        "evals.TrialPair",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judge_call_records",
    )
    position = models.CharField(max_length=10, blank=True)
    judge_run = models.ForeignKey(
        "JudgeRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="call_records",
    )
    # The injection probe run the call belongs to (``judges.probes``): paid like any other.
    probe_run = models.ForeignKey(
        "ProbeRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="call_records",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SENT)
    outcome = models.CharField(
        max_length=10, choices=Outcome.choices, default=Outcome.PENDING, blank=True
    )
    attempts = models.PositiveIntegerField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(
        max_digits=COST_USD_MAX_DIGITS,
        decimal_places=COST_USD_DECIMAL_PLACES,
        null=True,
        blank=True,
    )
    price_source = models.CharField(max_length=100, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    sent_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["run", "judge_version"], name="judge_call_run_version"),
        ]

    def __str__(self) -> str:
        return f"{self.judge_version_id} call {self.nonce[:8]} ({self.status})"
