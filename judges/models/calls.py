"""Judge calls: the claim a worker holds on a call before paying for it (``JudgeClaim``) and
the ledger of every call sent (``JudgeCallRecord``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from judges.models.versions import JudgeVersion


class JudgeClaim(models.Model):
    """A worker's hold on one judge call still to be made (``judges.claims``). Keyed by the row
    the call will write: (``trial``, ``grader``) or (``pair``, ``judge_version``,
    ``position``). ``holder`` is one chunk execution's token; past ``lease_expires_at`` the
    claim may be taken over. ``judge_run`` (None: a run's judge rung) tells the sweeper which
    task to enqueue again."""

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
    """One call sent to a judge endpoint: the provider's bill, line by line.

    Written within ``judges.calling.WRITE_WINDOW_S`` of its permit (so a killed worker's call
    still counts): ``claimed`` while it waits for the endpoint's limiter, ``sent`` once its
    first request goes out, then ``answered`` or ``failed`` (after every attempt); a call that
    ends with no request made (a cancel while it waited, a refused parameter, the limiter's
    store unreachable) stays ``claimed``, as does one whose worker died before it was sent:
    it cost nothing and is not a call sent. ``attempts``: HTTP requests made. Tokens: the
    classes of ``providers.usage``. ``cost_usd``: USD at the answering model's price, null when
    unknown (never zero). ``outcome``: ``stored``, ``lost`` (another call wrote the row first: still
    paid), or empty while pending. ``nonce`` (also in the grade's ``details.nonce``) names the
    call. ``run`` is the head run for a pairwise call; ``judge_run`` None for a rung or direct
    call; ``probe_run`` calls have no run, trial or pair."""

    class Status(models.TextChoices):
        CLAIMED = "claimed", "claimed, never sent"
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
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_read_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(
        max_digits=COST_USD_MAX_DIGITS,
        decimal_places=COST_USD_DECIMAL_PLACES,
        null=True,
        blank=True,
    )
    price_source = models.CharField(max_length=100, blank=True)
    # What the cost rests on, or why it is unknown (``providers.pricing.Costing.basis``);
    # changed only by ``manage.py reprice_run``. Null: written before token classes.
    cost_basis = models.JSONField(null=True, blank=True)
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
