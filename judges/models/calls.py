"""Judge calls: the claim a worker holds on a call before paying for it (``JudgeClaim``) and
the ledger of every call sent (``JudgeCallRecord``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.bounds import COST_USD_DECIMAL_PLACES, COST_USD_MAX_DIGITS
from judges.models.versions import JudgeVersion


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
